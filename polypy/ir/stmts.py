"""The statement nodes of the IR (``Stmt``: declarations, stores, atomics, barriers, warp
operations, structured control flow). Used through ``polypy.ir.nodes``."""
from __future__ import annotations


from polypy.ir.types import ScalarType
from polypy.ir.node_base import Node, _node
from polypy.ir.exprs import Expr


# --------------------------------------------------------------------------- statements


@_node
class Stmt(Node):
    pass


@_node
class Decl(Stmt):
    """Declares the local scalar ``name`` (unique in the kernel), optionally initialized.

    ``let`` (printed ``let x: i32 = e``): a binding, a name for the value ``init`` that nothing
    assigns again; it holds that value wherever it is in scope (the rest of its block). A
    source local kept by ``forward_scalars``: analyses that need the expression look the
    definition up (``polypy.ir.queries.let_values``, ``substitute_lets``)."""

    CHILDREN = ("init",)

    name: str
    vtype: ScalarType
    init: Expr | None = None
    let: bool = False


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


ATOMIC_OPS = ("add", "sub", "max", "min", "exch", "cas", "and", "or", "xor", "inc", "dec", "malloc", "free")
# The device heap's allocator (docs/device_heap.md): atomic read-modify-writes of the heap's
# bookkeeping, on its ``u64`` pool at index 0 (``HeldPointerSlots`` of symbol ``HEAP``).
HEAP_OPS = ("malloc", "free")


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
    """``__syncthreads()``: every live thread of the block waits here; memory is then visible.
    ``scope`` ``grid``: ``cooperative_groups::this_grid().sync()``, every thread of every block of
    the (cooperative) launch waits here (docs/cooperative_groups.md); it stays in the CPU form, at
    block level between thread loops."""

    scope: str = "block"


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
    arguments (i32/u32/i64/u64 and f64), one per conversion. A ``%s`` the frontend did not fold
    (a character array built at run time) reads the next ``strings[k]`` arguments (the k-th such
    ``%s``): the array's bytes as i32, printed up to the first 0 byte, as C's ``%s`` of the array.
    A side effect: kept, never hoisted or merged across threads."""

    CHILDREN = ("args",)

    format: str
    args: tuple[Expr, ...] = ()
    strings: tuple[int, ...] = ()


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
    stops the thread, and the launch then fails with ``cudaErrorAssert``.

    ``fault`` ``"misaligned"``: not an assert but the fault of an access at an address that is
    not a multiple of its size (a typed view at an offset polypy checks at run time,
    ``frontend/lower/views.py``): the message says ``misaligned address`` with ``text`` and the
    source column ``col``, and the launch fails with ``cudaErrorMisalignedAddress``."""

    CHILDREN = ("where",)

    text: str
    file: str
    line: int
    function: str
    where: tuple[Expr, ...] = ()  # blockIdx.x, .y, .z, threadIdx.x, .y, .z (u32), for the message
    fault: str = "assert"  # or "misaligned"
    col: int = 0


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
