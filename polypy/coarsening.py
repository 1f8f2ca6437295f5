"""When a launch runs coarse blocks: the launch-time half of block coarsening, shared by backends.

``gpu2cpu.coarsen_blocks`` builds, per block shape, a block function for *coarse blocks* of
``factor`` consecutive blocks along x (``Kernel.coarsen``); whether a given launch uses it or the
kernel's own block function depends on its grid, known only at launch: coarse blocks are fewer,
and a grid with too few of them would leave workers idle. The last coarse block of a row may be
partial (fewer blocks left than the factor): it runs as one, over the blocks that are left.
The test is the guard ``polypy.ir.versions.EnoughCoarseBlocks`` of the coarse version:
``polypy.driver.api`` evaluates it before each JIT launch (``coarsening_pays``), ``codegen.c``
prints it into its dispatching launcher.
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
    """Whether a launch of ``grid`` on ``workers`` threads should run coarse blocks of ``factor``:
    the guard ``EnoughCoarseBlocks`` of the coarse version (``polypy.ir.versions``, the one
    definition the C launcher prints), evaluated."""
    from polypy.ir.versions import EnoughCoarseBlocks, Facts, Guard

    return Guard((EnoughCoarseBlocks(tuple(factor), blocks_per_worker),)).holds(Facts(grid=tuple(grid),
                                                                                         workers=workers))


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


@dataclasses.dataclass(frozen=True)
class Unselectable:
    """A coarse version not made: no launch can select it (``selectable_only``), for the report."""

    why: str
    factor: int = 1


def selectable_only(coarsen, host, decisions: dict | None = None) -> object:
    """``coarsen`` (per kernel and block shape, its version for coarse blocks or None:
    ``codegen.c``'s ``Coarsener``) without the versions no launch of the whole program ``host``
    can select: where every launch of the kernel with that block shape has a grid known at
    compile time with fewer coarse blocks than a single worker needs (jacobi's 1-block-wide
    ``set_boundary`` grid and a factor of 32). Kept where a launch's grid is unknown, and for
    kernels launched other than by the program's own ``<<<...>>>`` (named as values, launched
    from device code or from another file, or any launch through a pointer). ``decisions``
    (``block_coarsener``'s) gets an ``Unselectable`` where a version is not made."""
    grids: dict[tuple[str, tuple[int, int, int]], list] = {}
    for site in host.launches:
        if site.block_shape is not None:
            grids.setdefault((site.kernel, site.block_shape), []).append(site.grid_shape)
    closed = host.has_main and not host.part and not any(f.indirect for f in host.files.values())

    def wrapped(kernel: n.Kernel, block: tuple[int, int, int], fine: n.Kernel) -> CoarseVersion | None:
        coarse = coarsen(kernel, block, fine)
        if coarse is None or coarse.blocks_per_worker <= 0 or not closed or kernel.name in host.as_values:
            return coarse
        sites = grids.get((kernel.name, tuple(block)), [])
        if sites and all(g is not None and coarse_blocks(g, coarse.factor) < coarse.blocks_per_worker for g in sites):
            if decisions is not None:
                grids_text = ", ".join(sorted({f"({','.join(map(str, g))})" for g in sites}))
                factor = "x".join(map(str, coarse.factor))
                decisions[(kernel.name, tuple(block))] = Unselectable(
                    f"coarse blocks of {factor} are never selected: its grid {grids_text} has fewer than "
                    f"{coarse.blocks_per_worker} of them")
            return None
        return coarse

    return wrapped
