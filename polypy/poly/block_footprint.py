"""Footprints of block ranges: which indices of each array one slice of a launch's grid touches.

A launch's blocks are independent except through global memory. ``split_grid`` cuts the grid
into contiguous ranges of blocks along its slowest-varying dimension (z, else y, else x)::

    grid (gx, gy), 3 tasks along y:    y  0 ┌──────────┐
                                          │  task 0  │  blockIdx.y in [0, 2)
                                        2 ├──────────┤
                                          │  task 1  │  blockIdx.y in [2, 4)
                                        4 ├──────────┤
                                          │  task 2  │  blockIdx.y in [4, 5)
                                        5 └──────────┘

so that each range is one interval of linear block ids (x fastest), which the JIT runs directly.
``plan_block_ranges`` adds each range as constraints on ``blockIdx`` to the launch's polyhedral
model and answers, per range and pointer parameter, the interval of indices read and the
interval written (``RangeFootprint``), then checks that the ranges can run apart and be merged
back: the written intervals of different ranges are disjoint, and no range reads what another
writes (blocks may communicate only through atomics, and those only where the ranges' elements
are disjoint: then each range's atomics are plain updates of elements nobody else touches).
Anything else is a ``UserError`` naming the array.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

import islpy as isl

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType
from polypy.poly.model import BLOCK_IDX, Access, Launch, Model, build_model

DIMS = "xyz"


@dataclasses.dataclass(frozen=True)
class BlockRange:
    """Blocks with ``blockIdx[dim]`` in ``[lo, hi)`` (every value of the other dimensions)."""

    dim: int
    lo: int
    hi: int

    def __str__(self) -> str:
        return f"blockIdx.{DIMS[self.dim]} in [{self.lo}, {self.hi})"


@dataclasses.dataclass(frozen=True)
class Interval:
    """Indices ``lo..hi`` inclusive; a bound is None where isl found none."""

    lo: int | None
    hi: int | None

    @property
    def bounded(self) -> bool:
        return self.lo is not None and self.hi is not None

    def overlaps(self, other: Interval) -> bool:
        """Whether the two may share an index (an unknown bound may reach anything)."""
        below = self.hi is not None and other.lo is not None and self.hi < other.lo
        above = other.hi is not None and self.lo is not None and other.hi < self.lo
        return not (below or above)

    def __str__(self) -> str:
        lo = "-inf" if self.lo is None else str(self.lo)
        hi = "+inf" if self.hi is None else str(self.hi)
        return f"[{lo}, {hi}]"


@dataclasses.dataclass(frozen=True)
class RangeFootprint:
    """What one block range does to one pointer parameter.

    ``read``/``write``: intervals holding every index read / written (sound over-approximations;
    None: never). ``covered``: every index of ``write`` is certainly written (the write set is
    exact and has no holes), so its old contents are not needed. ``atomic``: some access is an
    atomic read-modify-write.
    """

    param: str
    read: Interval | None
    write: Interval | None
    covered: bool
    atomic: bool


@dataclasses.dataclass(frozen=True)
class BlockPlan:
    """The ranges a launch is cut into and, per range, the footprint of every pointer parameter."""

    ranges: tuple[BlockRange, ...]
    footprints: tuple[dict[str, RangeFootprint], ...]


def split_grid(grid: tuple[int, int, int], tasks: int) -> tuple[BlockRange, ...]:
    """At most ``tasks`` ranges of nearly equal size along the slowest dimension of more than
    one block (x for a grid of one block): fewer where that dimension has fewer blocks."""
    if tasks < 1:
        raise UserError(f"tasks must be a positive int, got {tasks!r}")
    dim = next((d for d in (2, 1) if grid[d] > 1), 0)
    extent = grid[dim]
    count = min(tasks, extent)
    bounds = [extent * i // count for i in range(count + 1)]
    return tuple(BlockRange(dim, lo, hi) for lo, hi in zip(bounds, bounds[1:]))


def plan_block_ranges(kernel: n.Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
                      scalars: Mapping[str, object], tasks: int) -> BlockPlan:
    """Cut a launch of the GPU-form ``kernel`` into at most ``tasks`` block ranges and compute
    their footprints; raise ``UserError`` (naming the array) if they cannot run apart."""
    ranges = split_grid(grid, tasks)
    model = build_model(kernel, launch=Launch.of(grid, block, scalars))
    footprints = tuple(range_footprints(model, r) for r in ranges)
    plan = BlockPlan(ranges, footprints)
    check_independent(kernel, plan)
    return plan


def range_footprints(model: Model, r: BlockRange) -> dict[str, RangeFootprint]:
    """Per pointer parameter of the model's kernel, its footprint for the blocks of ``r``."""
    affs = isl.affs_from_space(model.space)
    b = affs[BLOCK_IDX[r.dim]]
    blocks = b.ge_set(affs[0] + r.lo) & b.lt_set(affs[0] + r.hi)
    out = {}
    for p in model.kernel.params:
        if not isinstance(p.ptype, PointerType):
            continue
        accesses = model.accesses_of(p.name)
        reads = [a for a in accesses if a.reads]
        writes = [a for a in accesses if a.writes]
        read, _ = _interval(reads, blocks)
        write, covered = _interval(writes, blocks)
        out[p.name] = RangeFootprint(p.name, read, write, covered, any(a.kind == "atomic" for a in accesses))
    return out


def _interval(accesses: list[Access], blocks: isl.Set) -> tuple[Interval | None, bool]:
    """The interval holding the indices ``accesses`` touch in ``blocks`` (None: none), and
    whether every index of it is certainly touched."""
    sets = []
    for a in accesses:
        e = a.elems[0]
        if e is None:  # an index isl cannot follow: anything
            return Interval(None, None), False
        dom = a.domain & blocks.align_params(a.domain.space.params())
        if dom.is_empty():
            continue
        s = isl.Map.from_pw_aff(e).intersect_domain(dom).range()
        sets.append((s.set_dim_name(isl.dim_type.set, 0, "i").reset_tuple_id(), a))
    if not sets:
        return None, False
    union = sets[0][0].project_out_all_params()
    for s, _ in sets[1:]:
        union = union | s.project_out_all_params()
    if union.is_empty():
        return None, False
    lo, hi = _value(union.dim_min_val(0)), _value(union.dim_max_val(0))
    interval = Interval(lo, hi)
    if lo is None or hi is None:
        return interval, False
    exact = all(a.exact and not _has_params(s, a) for s, a in sets)
    if not exact:
        return interval, False
    box = isl.Set(f"{{ [i] : {lo} <= i <= {hi} }}", context=union.get_ctx())
    return interval, union.is_equal(box)


def _has_params(s: isl.Set, a: Access) -> bool:
    """Whether the access depends on an unknown the launch leaves (a trip count, a loaded value):
    then its set, with the unknown projected out, is an over-approximation."""
    for obj in [s, a.domain] + [e for e in a.elems if e is not None]:
        for pos in range(obj.dim(isl.dim_type.param)):
            if obj.involves_dims(isl.dim_type.param, pos, 1):
                return True
    return False


def _value(v: isl.Val) -> int | None:
    if v.is_infty() or v.is_neginfty() or v.is_nan():
        return None
    return int(v.to_python())


def check_independent(kernel: n.Kernel, plan: BlockPlan) -> None:
    """Refuse a plan whose ranges share written memory: two ranges writing the same interval,
    or one range reading what another writes (atomics included: they may only update elements
    no other range touches)."""
    params = {p.name: p for p in kernel.params}
    for name, p in params.items():
        if not isinstance(p.ptype, PointerType):
            continue
        for i, fi in enumerate(plan.footprints):
            f = fi[name]
            if f.write is None:
                continue
            if not f.write.bounded:
                raise UserError(f"kernel {kernel.name!r}: isl cannot bound the indices of {name!r} the blocks with "
                                f"{plan.ranges[i]} write, so their writes cannot be merged back", p.loc)
            for j, fj in enumerate(plan.footprints):
                if j == i:
                    continue
                g = fj[name]
                what = "atomic updates" if f.atomic else "writes"
                if j > i and g.write is not None and f.write.overlaps(g.write):
                    raise UserError(
                        f"kernel {kernel.name!r}: {what} of {name!r} by the blocks with {plan.ranges[i]} (indices "
                        f"{f.write}) and by those with {plan.ranges[j]} (indices {g.write}) may overlap; the "
                        f"ranges cannot run as separate tasks", p.loc)
                if g.read is not None and f.write.overlaps(g.read):
                    raise UserError(
                        f"kernel {kernel.name!r}: the blocks with {plan.ranges[j]} read indices {g.read} of {name!r}, "
                        f"which may overlap what the blocks with {plan.ranges[i]} write ({f.write}); blocks "
                        f"that communicate through memory cannot run as separate tasks", p.loc)
