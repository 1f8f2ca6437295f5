"""When a launch runs coarse blocks: the launch-time half of block coarsening, shared by backends.

``gpu2cpu.coarsen_blocks`` builds, per block shape, a block function for *coarse blocks* of
``factor`` consecutive blocks along x (``Kernel.coarsen``); whether a given launch uses it or the
kernel's own block function depends on its grid, known only at launch: coarse blocks are fewer,
and a grid with too few of them would leave workers idle. The last coarse block of a row may be
partial (fewer blocks left than the factor): it runs as one, over the blocks that are left.
``polypy.driver.api`` applies ``coarsening_pays`` before each JIT launch; ``codegen.c`` renders
the same test into its dispatching launcher (``pays_in_c``).
"""
from __future__ import annotations

import dataclasses
import math

from polypy.ir import nodes as n

# Full coarse blocks a launch needs per worker thread to run coarse: enough to balance the load
# (the launchers hand out blocks in chunks) with a little to spare.
BLOCKS_PER_WORKER = 8


@dataclasses.dataclass(frozen=True)
class CoarseVersion:
    """A kernel's block function for coarse blocks (``kernel.coarsen``), for one block shape, and
    how many full coarse blocks per worker a launch needs to use it (0: every launch does)."""

    kernel: n.Kernel
    blocks_per_worker: int = BLOCKS_PER_WORKER

    @property
    def factor(self) -> tuple[int, int, int]:
        return self.kernel.coarsen


def coarse_blocks(grid: tuple[int, int, int], factor: tuple[int, int, int]) -> int:
    """The coarse blocks of a launch, the partial ones included."""
    return math.prod(-(-g // f) for g, f in zip(grid, factor))


def coarsening_pays(grid: tuple[int, int, int], factor: tuple[int, int, int], workers: int, *,
                    blocks_per_worker: int = BLOCKS_PER_WORKER) -> bool:
    """Whether a launch of ``grid`` on ``workers`` threads should run coarse blocks of ``factor``."""
    return coarse_blocks(grid, factor) >= blocks_per_worker * max(1, workers)


def pays_in_c(grid: tuple[str, str, str], factor: tuple[int, int, int], workers: str, blocks_per_worker: int) -> str:
    """``coarsening_pays`` as a C expression over the C expressions ``grid`` and ``workers``."""
    if blocks_per_worker <= 0:
        return "1"
    count = " * ".join(f"(((unsigned long long){g} + {f - 1}ull) / {f}ull)" if f != 1 else f"(unsigned long long){g}"
                       for g, f in zip(grid, factor))
    return f"{count} >= {blocks_per_worker}ull * (unsigned long long)({workers})"


@dataclasses.dataclass(frozen=True)
class LaunchVersion:
    """Which version of its kernel a launch site of a whole program runs, and why (``polypy
    translate --report``): the version specialized for its block shape -- coarsened or not --
    when the shape is known at compile time (``LaunchSite.block_shape``), else the generic one.

    ``coarse``: the coarsening decision for the shape (an object with ``factor`` and ``why``,
    ``gpu2cpu.coarsen_blocks.Coarsening``), None where none was made."""

    kernel: str
    loc: object
    block: tuple[int, int, int] | None
    block_from: str
    specialized: bool
    why: str = ""  # why the generic version (a shape known but not specialized for)
    coarse: object = None

    def format(self) -> str:
        where = f"{self.loc}: " if self.loc is not None else ""
        head = f"{where}launch of {self.kernel}: "
        if self.block is None:
            return head + f"block not known at compile time ({self.block_from}) -> generic version"
        shape = f"block ({','.join(map(str, self.block))}) from {self.block_from}"
        if not self.specialized:
            return head + f"{shape} -> generic version: {self.why}"
        factor = getattr(self.coarse, "factor", 1)
        if factor > 1:
            return head + (f"{shape} -> specialized, coarsened x{factor} along x (where the grid has at least "
                           f"{BLOCKS_PER_WORKER} coarse blocks per worker; else specialized)")
        why = getattr(self.coarse, "why", "")
        return head + f"{shape} -> specialized, not coarsened" + (f": {why}" if why else "")
