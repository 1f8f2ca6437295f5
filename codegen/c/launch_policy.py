"""What a C launcher decides from its kernel alone (``codegen.c.kernel`` renders the launcher):
when the grid runs on the calling thread instead of a team (``runs_alone``), and which pointer
parameters get sums per worker (``worker_sums``)."""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.ir.visitor import has_kind, walk_only

# Worker sums (``worker_sums``): the element added to is at most this index.
MAX_SUM_SLOT = 16

# What a math function call counts for in ``_thread_cost`` (expf, sqrt: tens of cycles).
CALL_COST = 8


def runs_alone(kernel: n.Kernel, threads: int) -> tuple[str, str]:
    """(the C condition under which a launch runs its blocks on the calling thread, why), for a
    launcher of ``kernel`` with ``threads`` OpenMP threads (0: the runtime's default).

    A grid of one block runs on the calling thread: waking the team for it costs more than the
    block (lud's diagonal kernel, launched once per step; with OMP_WAIT_POLICY=passive a wake-up
    is tens of microseconds). So does a small grid of a kernel without loops of its own (a few
    operations a thread: ADI's 1,024-thread steps, JACOBI1D's 4,096). Nor is a team of one made
    (OMP_NUM_THREADS=1, torch.set_num_threads(1)): the parallel construct alone costs a quarter
    of a microsecond per launch (libgomp makes the team)."""
    blocks = "(unsigned long long)gridDim.x * gridDim.y * gridDim.z"
    alone = f"{blocks} <= 1ull"
    why = "one block"
    if not _has_source_loops(kernel):
        cost = _thread_cost(kernel)
        alone += f" || {blocks} * blockDim.x * blockDim.y * blockDim.z * {cost}ull < POLYPY_RT_SMALL_GRID_WORK"
        why = (f"one block, or (a kernel without loops, {cost} operations a thread at most) fewer "
               "threads x operations than POLYPY_RT_SMALL_GRID_WORK")
    if threads == 0:
        alone += " || POLYPY_WORKERS() <= 1"
        why += "; or a team of one thread"
    return alone, why


def small_grid_cost(kernel: n.Kernel) -> int:
    """What ``polypy_run_blocks`` (the prelude) weighs a thread of ``kernel`` at for ``runs_alone``'s
    small-grid test: the operations of a thread of a kernel without loops of its own; 0 (never a
    small grid) for a kernel with loops."""
    return 0 if _has_source_loops(kernel) else _thread_cost(kernel)


def worker_sums(kernel: n.Kernel) -> list[tuple[int, int, ScalarType]]:
    """(parameter index, element, element type) of each pointer parameter that the kernel only
    adds to (``Kernel.private_atomics``: ``atomic.add`` without its old value, or a versioned
    gradient's plain ``b[i] = b[i] + v``), always at one constant element below
    ``MAX_SUM_SLOT`` (``*out += block_sum``: reduce_sum, a gradient's ``d_alpha[0]``). On a
    CPU every block's atomic on that element is a compare-and-swap on a cache line all cores
    fight for; a worker's blocks run one after the other, so they can add into a private
    copy, added to the array once per worker. The adds are reassociated, as atomics allow."""
    out = []
    index_of = {p.name: i for i, p in enumerate(kernel.params)}
    for name in kernel.private_atomics:
        index = index_of[name]
        param = kernel.params[index]
        slots = {x.index for x in walk_only(kernel, n.AtomicRMW, n.Load, n.Store) if x.buffer == name}
        if len(slots) != 1:
            continue
        (slot,) = slots
        if len(slot) != 1 or not isinstance(slot[0], n.Const) or not 0 <= int(slot[0].value) < MAX_SUM_SLOT:
            continue
        out.append((index, int(slot[0].value), param.ptype.elem))  # type: ignore[union-attr]
    return out


def _has_source_loops(kernel: n.Kernel) -> bool:
    """Whether a thread of ``kernel`` runs loops of its own (not the CPU form's thread loops)."""
    return has_kind(kernel, n.While) or any(x.kind != "threads" for x in walk_only(kernel, n.For))


def _thread_cost(kernel: n.Kernel) -> int:
    """The operations a thread of a loop-free ``kernel`` runs at most, roughly: its loads, stores,
    atomics and arithmetic (both versions of a block function count: an over-estimate), a math
    call ``CALL_COST``: how much a small grid's launch costs, against waking the team."""
    ops = (n.Unary, n.Binary, n.Select, n.Load, n.Store, n.AtomicRMW)
    return sum(1 for x in walk_only(kernel, ops)) + CALL_COST * sum(
        1 for x in walk_only(kernel, n.Call)) or 1
