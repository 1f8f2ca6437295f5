"""Kernels and modules of the IR: ``Param``, ``Buffer``, ``Kernel``, ``Module``. Used through
``polypy.ir.nodes``."""
from __future__ import annotations

import dataclasses
from dataclasses import field

from polypy.errors import Loc, UserError
from polypy.ir.types import PointerType, ScalarType
from polypy.ir.node_base import Node, _node
from polypy.ir.exprs import Expr
from polypy.ir.stmts import Stmt


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
# ``HeldPointerSlots.symbol`` of the device heap's pools (no C identifier: never a symbol's name).
HEAP = "<device heap>"


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
class HeldPointerSlots:
    """A note, not IR: pointers that a kernel reads from a ``__constant__``/``__device__`` array of
    records (Rodinia heartwall's ``d_unique[bx].d_in2``) point into device memory of ``elem``,
    which the kernel sees as the pointer parameter ``pool`` starting at address ``base`` (a ``u64``
    parameter), ``extent`` elements long (a ``u64`` parameter; the kernel does not read it).
    Launchers fill the three from the symbol's bytes at each launch: ``count`` records of
    ``size`` bytes at the C variable ``symbol``, the pointers at byte ``offsets`` of each (with
    their member paths, ``(8, ".d_in2")``); every
    pointer that is not null must point into a live ``cudaMalloc`` allocation at a multiple of
    ``elem``'s size (else the launch stops, located at ``loc``, the first read); ``pool`` is the
    lowest such allocation and the pool covers up to the end of the highest
    (``polypy_rt_held_pointers``). No C parameter maps to them (``SourceParam``). ``spellings``:
    the source text of each read of a pointer (``d_unique[bx].d_in2``), by the location of its
    ``n.Load``, for the race diagnostics (``polypy.poly.held.held_text``)."""

    pool: str
    base: str
    extent: str
    elem: ScalarType
    symbol: str
    size: int
    count: int
    offsets: tuple[tuple[int, str], ...]
    loc: Loc | None = None
    spellings: tuple[tuple[Loc, str], ...] = ()

    def what(self) -> str:
        """What the kernel does that needs these pools, for refusals: ``reads pointers from ...``."""
        if self.symbol == HEAP:
            return "uses the device heap (malloc, free, new, delete in device code)"
        return f"reads pointers from __constant__ or __device__ memory ('{self.symbol}')"


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
    # The bounds-checked version of a kernel (CPU form only; ``version-bounds-checks``,
    # ``polypy.passes.versions``): every access of the arrays ``bounds_checks`` (pointer parameters,
    # shared arrays; IR names) is compared with its array's extent first, and the first one
    # outside it stops the launch, touching nothing there (``codegen.llvm.lower``). Those of
    # ``checked_slices`` (shared arrays of a coarse kernel with one slice per sub-block) are
    # checked against their slice. Empty: nothing is checked.
    bounds_checks: tuple[str, ...] = ()
    checked_slices: tuple[str, ...] = ()
    # The pointer parameters ``gpu2cpu.privatize_atomics`` found touched only by atomic adds whose
    # result is unused: a launcher may accumulate them per CPU worker. A note, not IR: it takes
    # no part in equality, printing or parsing, and traversals do not visit it.
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
    # Pointer parameters the kernel views as a type of a stricter alignment than their elements'
    # (``reinterpret_cast<float4*>(x)`` of a ``float* x``), ``(param, bytes, loc of the cast)``:
    # polypy checks view offsets from the start of the argument, so a launch refuses an argument
    # whose address is not a multiple of ``bytes`` (``polypy.driver.api``). A note like the above.
    aligned: tuple[tuple[str, int, Loc | None], ...] = field(default=(), compare=False, repr=False)
    # Pointer parameters of a ``volatile`` element type in the source (the frontend): every access
    # of them is a memory access. A note like the above.
    volatile_params: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # Volatile pointer parameters a loop polls that only the host or another stream's work can
    # write (``gpu2cpu.refuse_spin_waits`` in a whole program): the C code reads them as volatile,
    # and the launcher runs only on a stream's worker thread (docs/runtime_api.md). A note like the above.
    host_polls: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # Pointers the kernel reads from ``__constant__``/``__device__`` records, by the pool of device
    # memory they point into (``HeldPointerSlots``): hidden parameters launchers fill. A note like the above.
    held_pointers: tuple[HeldPointerSlots, ...] = field(default=(), compare=False, repr=False)

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
