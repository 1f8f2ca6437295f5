"""refuse_warp_synchronous: a located error for implicit warp-synchronous code left as it is.

Requires: GPU form, after ``lockstep-warps``. Guarantees: the kernel is unchanged, or the
translation stops with a ``UserError`` at a shared-memory access two threads of one warp race on
(no barrier between them), naming the other access.

Such code (a ``volatile __shared__`` scan in one warp, a reduction's unrolled last warp without
barriers) relies on the 32 lanes of a warp stepping together, as GPUs did before Volta. The CPU
schedule runs a block's threads one after another between barriers and regroups them (fission,
vectorization), which gives another answer: the classic reduction's last warp summed 64 floats
to 1.5e10 instead of 2016. ``lockstep-warps`` gives such code its lockstep order where barriers
can express it; a race inside one warp still there (in a loop whose trips differ between
threads, say) is refused. The exact isl question is ``polypy.poly.block_races``. Races between
warps are a legal schedule of the block and only warned about (``translate --report``).
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.poly.block_races import warp_races


def refuse_warp_synchronous(kernel: n.Kernel) -> n.Kernel:
    races = warp_races(kernel)
    if races:
        raise races[0].error()
    return kernel
