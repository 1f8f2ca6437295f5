"""Nodes of the polypy IR.

Frozen dataclasses with ``slots``; children are tuples, never lists. Every node carries a
``loc`` that does not take part in equality, so two structurally equal trees from different
places compare equal (which is what golden tests and common-subexpression checks want).

Two hierarchies:

* ``Expr`` — side-effect free values, each with a ``type``. Loads are expressions;
  everything that writes or synchronizes is a statement.
* ``Stmt`` — declarations, assignments, stores, atomics, barriers, warp operations and
  structured control flow. There is no ``goto``; loops have ``break``/``continue``.

Names of locals are unique inside a kernel (the frontend renames shadowed variables), so a
name identifies one variable everywhere in the kernel and passes need no scope tracking.

A kernel has a ``stage``: ``"gpu"`` (implicit threads: ``ThreadIdx`` expressions, ``Barrier``
statements) or ``"cpu"`` (one block's work with explicit thread loops; see gpu2cpu).
"""
from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import ClassVar, Union

from polypy.errors import Loc, UserError
from polypy.ir.types import BOOL, U32, PointerType, ScalarType, normalize_value

def _node(cls: type) -> type:
    """A frozen, slotted dataclass whose hash is computed once per node (``_memo_hash``)."""
    cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
    computed = cls.__dict__.get("__hash__")
    if computed is not None:
        cls.__hash__ = _memo_hash(computed)
    return cls


def _memo_hash(compute):
    """The dataclass hash of the node's fields, remembered in the node: a node's hash is its
    children's hashes combined, so without the memo hashing a tree walks all of it, and a pass
    that hashes every level of a 100,000-term sum would take quadratic time."""

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = compute(self)
            object.__setattr__(self, "_hash", h)
        return h

    return __hash__


@_node
class Node:
    """Base of every IR node.

    ``CHILDREN`` (a class attribute, not a field) names, in field order, the fields that hold
    nodes or tuples of nodes (``None`` allowed): the ``Visitor`` and ``Mutator`` walk exactly
    these. ``BLOCKS`` names those among them that are statement lists (``If.then``, ``For.body``,
    ...), which the traversals hand to ``visit_block``. Every class with child fields lists
    them; the others inherit ``()``.
    """

    CHILDREN: ClassVar[tuple[str, ...]] = ()
    BLOCKS: ClassVar[tuple[str, ...]] = ()

    loc: Loc | None = field(default=None, compare=False, kw_only=True, repr=False)
    # The memo of ``__hash__`` (see ``_memo_hash``); not part of the node's value.
    _hash: int | None = field(default=None, init=False, compare=False, repr=False)
    # The memo of ``polypy.ir.queries.tree_size``; not part of the node's value.
    _size: int | None = field(default=None, init=False, compare=False, repr=False)
    # The memo of ``polypy.ir.queries``' questions about what a statement writes and declares
    # (a ``queries.StatementFacts``, kept for statements that hold blocks); not part of the value.
    _facts: object = field(default=None, init=False, compare=False, repr=False)


# --------------------------------------------------------------------------- expressions


@_node
class Expr(Node):
    @property
    def type(self) -> ScalarType:  # pragma: no cover - every subclass defines it
        raise NotImplementedError


@_node
class Const(Expr):
    """A literal. Integer values are stored wrapped to their type, f32 values rounded to f32."""

    value: int | float | bool
    ctype: ScalarType

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", normalize_value(self.value, self.ctype))

    @property
    def type(self) -> ScalarType:
        return self.ctype


@_node
class Var(Expr):
    """A local scalar variable or a scalar kernel parameter."""

    name: str
    vtype: ScalarType

    @property
    def type(self) -> ScalarType:
        return self.vtype


@_node
class GpuIndex(Expr):
    """Base of the four CUDA built-in index registers; ``dim`` is 0, 1, 2 for x, y, z."""

    dim: int

    @property
    def type(self) -> ScalarType:
        return U32


@_node
class ThreadIdx(GpuIndex):
    pass


@_node
class BlockIdx(GpuIndex):
    pass


@_node
class BlockDim(GpuIndex):
    pass


@_node
class GridDim(GpuIndex):
    pass


UNARY_OPS = ("neg", "not", "bnot")
ARITH_OPS = ("add", "sub", "mul", "div", "rem")
BIT_OPS = ("shl", "shr", "band", "bor", "bxor")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC_OPS = ("land", "lor")  # short-circuit: the right operand is evaluated only when needed
BINARY_OPS = ARITH_OPS + BIT_OPS + COMPARE_OPS + LOGIC_OPS


@_node
class Unary(Expr):
    """``neg`` (-x), ``not`` (!x on bool), ``bnot`` (~x on integers)."""

    CHILDREN = ("x",)

    op: str
    x: Expr
    _type: ScalarType | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def type(self) -> ScalarType:
        return self._type or _derived_type(self)

    def _own_type(self) -> tuple[ScalarType | None, Expr]:
        return (BOOL if self.op == "not" else None), self.x


@_node
class Binary(Expr):
    """A binary operation. Operands have the same type except for shifts (result: lhs type).

    Comparisons and ``land``/``lor`` produce ``bool``; ``land``/``lor`` take bool operands and
    evaluate ``b`` only when ``a`` does not decide the result (C's ``&&``/``||``).
    """

    CHILDREN = ("a", "b")

    op: str
    a: Expr
    b: Expr
    _type: ScalarType | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def type(self) -> ScalarType:
        return self._type or _derived_type(self)

    def _own_type(self) -> tuple[ScalarType | None, Expr]:
        return (BOOL if self.op in COMPARE_OPS or self.op in LOGIC_OPS else None), self.a


@_node
class Select(Expr):
    """``cond ? a : b``; only the chosen operand is evaluated (it may load out of bounds otherwise)."""

    CHILDREN = ("cond", "a", "b")

    cond: Expr
    a: Expr
    b: Expr
    _type: ScalarType | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def type(self) -> ScalarType:
        return self._type or _derived_type(self)

    def _own_type(self) -> tuple[ScalarType | None, Expr]:
        return None, self.a


_TYPE_FROM_OPERAND = (Unary, Binary, Select)


def _derived_type(node: Expr) -> ScalarType:
    """The type of a ``Unary``/``Binary``/``Select``, which is its first operand's unless the
    operation fixes it (comparisons: bool). Found down the chain of first operands without
    recursion and remembered in every node of the chain (``_type``): asking each level of a
    100,000-term sum for its type would otherwise take quadratic time and a deep stack."""
    chain = []
    while isinstance(node, _TYPE_FROM_OPERAND):
        found = node._type
        if found is not None:
            break
        found, operand = node._own_type()
        chain.append(node)
        if found is not None:
            break
        node = operand
    else:
        found = node.type
    for link in chain:
        object.__setattr__(link, "_type", found)
    return found


@_node
class Cast(Expr):
    """C conversion of ``x`` to ``to`` (float→int truncates toward zero; int→bool is ``!= 0``)."""

    CHILDREN = ("x",)

    to: ScalarType
    x: Expr

    @property
    def type(self) -> ScalarType:
        return self.to


@_node
class Call(Expr):
    """A pure math function by canonical name (``exp``, ``sqrt``, ``fmin``, ``min``, ...).

    ``fn`` names the operation independently of precision (``expf`` and ``exp`` are both
    ``exp``); ``rtype`` and the argument types say which precision. See ``polypy.ir.mathfns``.
    """

    CHILDREN = ("args",)

    fn: str
    args: tuple[Expr, ...]
    rtype: ScalarType

    @property
    def type(self) -> ScalarType:
        return self.rtype


@_node
class Load(Expr):
    """``buffer[index...]``. Pointer parameters take one index; arrays one per dimension."""

    CHILDREN = ("index",)

    buffer: str
    index: tuple[Expr, ...]
    etype: ScalarType

    @property
    def type(self) -> ScalarType:
        return self.etype


# --------------------------------------------------------------------------- statements


@_node
class Stmt(Node):
    pass


@_node
class Decl(Stmt):
    """Declares the local scalar ``name`` (unique in the kernel), optionally initialized."""

    CHILDREN = ("init",)

    name: str
    vtype: ScalarType
    init: Expr | None = None


@_node
class Assign(Stmt):
    CHILDREN = ("value",)

    name: str
    value: Expr


@_node
class Store(Stmt):
    CHILDREN = ("index", "value")

    buffer: str
    index: tuple[Expr, ...]
    value: Expr


ATOMIC_OPS = ("add", "sub", "max", "min", "exch", "cas", "and", "or", "xor", "inc", "dec")


@_node
class AtomicRMW(Stmt):
    """An atomic read-modify-write of ``buffer[index]``; the old value goes to ``dest`` if set.

    ``cas``: ``old == compare ? value : old`` is stored, comparing bits as CUDA's ``atomicCAS``
    does (a CAS on a float buffer comes from a typed view ``atomicCAS((int*)&x[i], ...)``: NaNs
    with equal bits are equal, -0.0 and 0.0 are not). ``inc``/``dec`` are CUDA's wrapping
    ``atomicInc``/``atomicDec`` with ``value`` as the limit.
    """

    CHILDREN = ("index", "value", "compare")

    op: str
    buffer: str
    index: tuple[Expr, ...]
    value: Expr
    dest: str | None = None
    compare: Expr | None = None


@_node
class Prefetch(Stmt):
    """A hint that ``buffer[index]`` will be read soon (CPU form only): no effect on the program's
    meaning. The element is not accessed, so ``index`` may lie outside the buffer."""

    CHILDREN = ("index",)

    buffer: str
    index: tuple[Expr, ...]


@_node
class Barrier(Stmt):
    """``__syncthreads()``: every live thread of the block waits here; memory is then visible."""


FENCE_SCOPES = ("block", "device", "system")


@_node
class Fence(Stmt):
    """``__threadfence_block()`` / ``__threadfence()`` / ``__threadfence_system()`` (``scope``): the
    thread's memory accesses before it are seen by every thread of the scope before its accesses
    after it. On the CPU (one shared memory, blocks on cores) each is a sequentially consistent
    fence, and, in a kernel that has one, every atomic is followed by one too: the reads after an
    atomic that tells a block it is the last (the ticket of the last-block pattern) see what the
    other blocks wrote before their fences. Both forms keep it."""

    scope: str


@_node
class Print(Stmt):
    """Device ``printf(format, args...)``: one thread's call writes its whole line(s) at once
    (calls of different threads are not interleaved within a call; CUDA gives no order between
    threads). ``format`` is C's printf format with the conversions of ``polypy.ir.printf`` (a
    ``%s`` of a string literal is folded into it by the frontend); ``args`` are the promoted
    arguments (i32/u32/i64/u64 and f64), one per conversion. A side effect: kept, never hoisted
    or merged across threads."""

    CHILDREN = ("args",)

    format: str
    args: tuple[Expr, ...] = ()


LAUNCH_STREAMS = ("stream", "tail", "fire_and_forget")


@_node
class Launch(Stmt):
    """``kernel<<<grid, block, shmem, stream>>>(args)`` in device code (dynamic parallelism, CUDA 12
    semantics): a launch of the module's kernel ``kernel``, its arguments taken by value now; the
    child grid runs after this kernel's grid has completed (with every write of the parent visible)
    and before the parent launch counts as complete, in launch order among the grid's launches
    (``stream`` ``tail``: after all the others, ``cudaStreamTailLaunch``), a child's own children
    after it. ``grid``/``block``: the x, y, z extents (u32); ``shmem``: bytes of dynamic shared
    memory (u64); ``args``: one per parameter of ``kernel`` in order -- a scalar's value, or for a
    pointer parameter (``pointers[i]`` the pointer parameter of this kernel it points into) the
    element offset (i64) into that buffer. The configuration is valid (the frontend tests it
    first, as CUDA's launch does). A side effect: each executing thread launches once."""

    CHILDREN = ("grid", "block", "shmem", "args")

    kernel: str
    grid: tuple[Expr, ...]
    block: tuple[Expr, ...]
    shmem: Expr
    args: tuple[Expr, ...]
    pointers: tuple[str | None, ...] = ()
    stream: str = "stream"


@_node
class AssertFail(Stmt):
    """A device ``assert`` whose condition was false (the frontend guards it with an ``if``):
    prints ``file:line: function: block: [..], thread: [..] Assertion `text` failed.`` to stderr,
    stops the thread, and the launch then fails with ``cudaErrorAssert``."""

    CHILDREN = ("where",)

    text: str
    file: str
    line: int
    function: str
    where: tuple[Expr, ...] = ()  # blockIdx.x, .y, .z, threadIdx.x, .y, .z (u32), for the message


@_node
class WarpSync(Stmt):
    """``__syncwarp(mask)``: the lanes of ``mask`` in this thread's warp wait for each other here,
    and see each other's memory accesses before it. GPU form right after the frontend only:
    ``gpu2cpu.lower_warp_syncs`` turns it into block barriers between guarded phases."""

    CHILDREN = ("mask",)

    mask: Expr


SHUFFLE_MODES = ("idx", "up", "down", "xor")


@_node
class Shuffle(Stmt):
    """``dest = __shfl[_mode]_sync(mask, value, lane_or_delta, width)`` over 32-lane warps."""

    CHILDREN = ("value", "lane", "width", "mask")

    dest: str
    mode: str
    value: Expr
    lane: Expr
    width: Expr
    mask: Expr


VOTE_MODES = ("ballot", "any", "all", "activemask")


@_node
class Vote(Stmt):
    """``dest = __ballot_sync / __any_sync / __all_sync (mask, pred)`` or ``__activemask()``."""

    CHILDREN = ("pred", "mask")

    dest: str
    mode: str
    pred: Expr
    mask: Expr


@_node
class If(Stmt):
    CHILDREN = ("cond", "then", "orelse")
    BLOCKS = ("then", "orelse")

    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


FOR_KINDS = ("serial", "threads")


@_node
class For(Stmt):
    """``for (vtype var = start; var < stop; var += step) body``.

    ``stop`` and ``step`` do not change inside the loop and ``var`` is not assigned in ``body``
    (the frontend only builds a ``For`` when that holds; everything else is a ``While``).
    ``var`` is declared by the loop and scoped to it. ``kind == "threads"`` marks a CPU-form
    loop over the threads of a block: its iterations are independent, unless ``ordered``: the
    loop runs two barrier intervals thread by thread, and a thread's part of the second interval
    may read what an earlier iteration wrote in the first (``gpu2cpu.fuse_thread_loops``). Its
    iterations run in order: no pass may distribute, interchange, reverse or vectorize it as if
    they were independent (splitting its range into consecutive pieces keeps the order).
    """

    CHILDREN = ("start", "stop", "step", "body")
    BLOCKS = ("body",)

    var: str
    vtype: ScalarType
    start: Expr
    stop: Expr
    step: Expr
    body: tuple[Stmt, ...]
    kind: str = "serial"
    ordered: bool = False


@_node
class While(Stmt):
    """``while (cond) { body; update }`` where ``continue`` in ``body`` jumps to ``update``."""

    CHILDREN = ("cond", "body", "update")
    BLOCKS = ("body", "update")

    cond: Expr
    body: tuple[Stmt, ...]
    update: tuple[Stmt, ...] = ()


@_node
class Break(Stmt):
    pass


@_node
class Continue(Stmt):
    pass


@_node
class Return(Stmt):
    """Ends the executing thread (kernels only; device functions are inlined)."""


# --------------------------------------------------------------------------- kernels and modules

SPACES = ("shared", "local", "constant", "device")


@_node
class Param(Node):
    name: str
    ptype: ScalarType | PointerType


@_node
class Buffer(Node):
    """An array that is not a pointer parameter.

    space ``shared``: one per block (``shape`` None for ``extern __shared__``: sized at launch);
    ``local``: one per thread; ``constant``/``device``: module globals (``__constant__`` /
    ``__device__`` arrays), with an optional flat initializer ``init``.
    Shapes are expressions: constants in GPU form; CPU-form buffers may use ``BlockDim``.
    ``symbol`` (module globals only): the C variable whose storage this buffer views, when it is
    not ``name`` -- a ``__constant__`` array of records of mixed member types is one buffer per
    member type (``params_i32``, ``params_f32``), each viewing the source's ``params``.
    ``part`` (CPU-form ``extern __shared__`` buffers only): ``(p, q)``, this buffer is part ``p`` of
    the ``q`` equal parts of the launch's dynamic shared memory (``N`` elements): it starts at
    element ``p * ceil(N / q)`` and has ``ceil((N - p) / q)`` elements, those ``i`` of the array
    ``symbol`` that the kernel addressed as ``i * q + p`` (``gpu2cpu.split_dynamic_shared``).
    ``frame`` (CPU-form ``shared`` buffers of constant shape only): a small array each run of the
    block function keeps in its own frame, uninitialized, rather than in the worker's scratch
    memory: every element the block reads it wrote first (``gpu2cpu.localize_uniform_loads``); C
    compilers keep such an array's elements in registers.
    """

    CHILDREN = ("shape",)

    name: str
    elem: ScalarType
    shape: tuple[Expr, ...] | None
    space: str
    init: tuple[int | float, ...] | None = None
    symbol: str | None = None
    part: tuple[int, int] | None = None
    frame: bool = False


# Member paths of a ``T**`` parameter's pool and pool address in its ``SourceParam``
# (``(("", "rows"), (TABLE_POOL, "rows_pool"), (TABLE_BASE, "rows_base"))``): launchers compute them
# from the table of pointers (the allocation its first pointer points into).
TABLE_POOL = ".polypy_pool"
TABLE_BASE = ".polypy_base"
# Member path of the i32 that says whether a pointer parameter is not null (1) or null (0), for
# a kernel that compares the pointer with a null pointer (``p != NULL``): launchers compute it.
NONNULL = ".polypy_nonnull"


@_node
class SourceParam(Node):
    """How one parameter of the C signature maps to IR parameters.

    A plain parameter maps to itself: ``members == (("", "n"),)``. A struct passed by value
    maps each scalar member path to one IR parameter: ``((".n", "p_n"), (".dims.x", "p_dims_x"))``.
    A pointer to records of mixed member types maps to one pointer per member type, all with
    path ``""``; a ``T**`` maps to its table (``""``), pool (``TABLE_POOL``) and pool address
    (``TABLE_BASE``).
    """

    name: str
    ctype: str
    members: tuple[tuple[str, str], ...]


@dataclasses.dataclass(frozen=True, slots=True)
class SourceLocal:
    """A note, not IR (no node, not visited): a local of the source that ``forward_scalars``
    substituted into its uses, with its value there, for code generators that name it again."""

    name: str
    vtype: ScalarType
    init: Expr


STAGES = ("gpu", "cpu")


@_node
class Kernel(Node):
    """One kernel. ``coarsen`` (CPU form only, ``(1, 1, 1)`` otherwise): the body is the work of
    a *coarse block*, up to ``coarsen[d]`` consecutive blocks along each dimension ``d``: the
    launcher runs it once for each ``blockIdx`` whose coordinates are multiples of ``coarsen``
    (``blockIdx`` is the coarse block's first block; ``gridDim`` and ``blockDim`` keep their
    meaning), and the body does the work of the blocks of the grid from there (see
    ``gpu2cpu.coarsen_blocks``, ``docs/ir.md``)."""

    CHILDREN = ("params", "buffers", "body", "source_params")
    BLOCKS = ("body",)

    name: str
    params: tuple[Param, ...]
    buffers: tuple[Buffer, ...]
    body: tuple[Stmt, ...]
    stage: str = "gpu"
    source_params: tuple[SourceParam, ...] = ()
    coarsen: tuple[int, int, int] = (1, 1, 1)
    # The named source locals that ``forward_scalars`` substituted away, in source order, for
    # the C renderer to name their values again (``codegen.c.readable``). A note, not IR: it
    # takes no part in equality, printing or parsing, and traversals do not visit it.
    source_locals: tuple[SourceLocal, ...] = field(default=(), compare=False, repr=False)
    # The pointer parameters ``gpu2cpu.privatize_atomics`` found touched only by atomic adds whose
    # result is unused: a launcher may accumulate them per CPU worker. A note like the above.
    private_atomics: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # Locals that sum the atomic adds of a thread loop (``gpu2cpu.sum_uniform_atomics``): CUDA gives
    # those adds no order, so a backend may reassociate ``s = s + v`` into them. A note like the above.
    order_free_sums: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # Pairs of pointer parameters that never share storage although neither is ``restrict``: a
    # gradient's shadows and the primal arguments (the gradient calling convention). The
    # launcher refuses arguments that overlap; alias analysis (``polypy.poly.alias``) relies on
    # it. A note like the above (lost in CUDA and IR text, where the pair may alias).
    disjoint: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)
    # Shared arrays the CPU schedule made as copies of another, ``(copy, original)``
    # (``gpu2cpu.split_scatter_adds``): the copy has a leading dimension of constant extent and
    # every access of it is one of the original's indices behind a constant, or a sweep of all
    # its elements, so it is in bounds wherever the original is (``polypy.driver.api`` proves a
    # launch's copies with their originals). A note like the above.
    copies: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def buffer(self, name: str) -> Buffer | None:
        for b in self.buffers:
            if b.name == name:
                return b
        return None

    def elem_type(self, buffer: str) -> ScalarType:
        """Element type of a pointer parameter or array named ``buffer``."""
        p = self.param(buffer)
        if p is not None and isinstance(p.ptype, PointerType):
            return p.ptype.elem
        b = self.buffer(buffer)
        if b is None:
            raise KeyError(buffer)
        return b.elem

    def space(self, buffer: str) -> str:
        """``global`` for pointer parameters, else the array's space."""
        p = self.param(buffer)
        if p is not None and isinstance(p.ptype, PointerType):
            return "global"
        b = self.buffer(buffer)
        if b is None:
            raise KeyError(buffer)
        return b.space


class UnknownKernel(UserError, KeyError):
    """``Module.kernel(name)`` with no such kernel: a user error, and a ``KeyError`` for callers
    that look kernels up like dictionary keys."""

    def __init__(self, message: str, name: str):
        super().__init__(message)
        self.name = name


@_node
class Module(Node):
    """What one source file gives: its kernels, module-level arrays and (optionally) host code."""

    CHILDREN = ("kernels", "globals")

    kernels: tuple[Kernel, ...]
    globals: tuple[Buffer, ...] = ()
    source: str = ""
    host: object | None = None  # frontend.host.HostProgram when the file has host code

    def kernel(self, name: str) -> Kernel:
        """The kernel called ``name``; ``UnknownKernel`` (a ``UserError`` and a ``KeyError``) names
        the kernels there are when there is none."""
        for k in self.kernels:
            if k.name == name:
                return k
        known = ", ".join(k.name for k in self.kernels) or "none"
        raise UnknownKernel(f"no kernel named '{name}' in {self.source or 'the module'} (kernels: {known})", name)

    def replace_kernel(self, kernel: Kernel) -> Module:
        kernels = tuple(kernel if k.name == kernel.name else k for k in self.kernels)
        return dataclasses.replace(self, kernels=kernels)


Block = tuple[Stmt, ...]
AnyNode = Union[Expr, Stmt, Param, Buffer, Kernel, Module]
