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
model and answers, per range and pointer parameter, the interval of indices read, the interval
written and the pieces to merge back (``RangeFootprint``): the maximal intervals of the exact
write set where isl has it (a grid-stride loop writes many strided pieces), else the whole
written interval, whose old contents then travel with the task so that elements it leaves alone
come back unchanged. Then it checks with isl that the ranges can run apart: what two ranges
merge back is disjoint, and no range reads what another may write (blocks may communicate only
through atomics, and those only where the ranges' elements are disjoint: then each range's
atomics are plain updates of elements nobody else touches). Anything else is a ``UserError``
naming the array.
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
    None: never). ``pieces``: disjoint intervals, in order, that hold every index written -- the
    slices to merge back. ``covered``: every index of ``pieces`` is certainly written (the write
    set is exact), so their old contents are not needed; otherwise ``pieces`` is the single
    interval ``write``, to be shipped in and sent back whole. ``atomic``: some access is an
    atomic read-modify-write.
    """

    param: str
    read: Interval | None
    write: Interval | None
    covered: bool
    atomic: bool
    pieces: tuple[tuple[int, int], ...] = ()


@dataclasses.dataclass(frozen=True)
class BlockPlan:
    """The ranges a launch is cut into and, per range, the footprint of every pointer parameter."""

    ranges: tuple[BlockRange, ...]
    footprints: tuple[dict[str, RangeFootprint], ...]


# An exact write set of more intervals than this is merged back as its hull instead (shipped in
# and sent back whole): enumerating and copying very many small pieces costs more than it saves.
MAX_PIECES = 4096


def split_grid(grid: tuple[int, int, int], tasks: int, *, align_x: int = 1) -> tuple[BlockRange, ...]:
    """At most ``tasks`` ranges of nearly equal size along the slowest dimension of more than
    one block (x for a grid of one block): fewer where that dimension has fewer blocks. Ranges
    along x start at multiples of ``align_x`` (coarse blocks of that many blocks stay whole)."""
    if tasks < 1:
        raise UserError(f"tasks must be a positive int, got {tasks!r}")
    dim = next((d for d in (2, 1) if grid[d] > 1), 0)
    unit = max(1, align_x) if dim == 0 else 1
    extent = grid[dim]
    units = -(-extent // unit)
    count = min(tasks, units)
    bounds = [min(extent, unit * (units * i // count)) for i in range(count + 1)]
    return tuple(BlockRange(dim, lo, hi) for lo, hi in zip(bounds, bounds[1:]))


def plan_block_ranges(kernel: n.Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
                      scalars: Mapping[str, object], tasks: int, *, align_x: int = 1) -> BlockPlan:
    """Cut a launch of the GPU-form ``kernel`` into at most ``tasks`` block ranges (see
    ``split_grid``) and compute their footprints; raise ``UserError`` (naming the array) if they
    cannot run apart."""
    ranges = split_grid(grid, tasks, align_x=align_x)
    model = build_model(kernel, launch=Launch.of(grid, block, scalars))
    for a in model.accesses:
        if a.writes and a.space == "device":
            raise UserError(f"kernel {kernel.name!r} writes the module's __device__ array {a.buffer!r}; in a "
                            f"distributed launch its updates would stay on the workers", a.loc)
    sets = [_range_sets(model, r) for r in ranges]
    _check_independent(kernel, ranges, sets)
    footprints = tuple({name: _footprint(name, acc) for name, acc in per_range.items()} for per_range in sets)
    return BlockPlan(ranges, footprints)


@dataclasses.dataclass
class _Accessed:
    """The isl sets of one array in one range (1-D, no parameters): indices read (``None``:
    none), written (over-approximated), merged back (the exact write set, or its hull)."""

    read: isl.Set | None
    write: isl.Set | None
    merged: isl.Set | None
    exact: bool
    pieces: tuple[tuple[int, int], ...]
    atomic: bool


def _range_sets(model: Model, r: BlockRange) -> dict[str, _Accessed]:
    affs = isl.affs_from_space(model.space)
    b = affs[BLOCK_IDX[r.dim]]
    blocks = b.ge_set(affs[0] + r.lo) & b.lt_set(affs[0] + r.hi)
    out = {}
    for p in model.kernel.params:
        if not isinstance(p.ptype, PointerType):
            continue
        accesses = model.accesses_of(p.name)
        read, _ = _union([a for a in accesses if a.reads], blocks)
        write, exact = _union([a for a in accesses if a.writes], blocks)
        merged, pieces = write, ()
        if write is not None and _bounded(write):
            pieces = _intervals(write) if exact else None
            if pieces is None:
                exact = False
                lo, hi = _value(write.dim_min_val(0)), _value(write.dim_max_val(0))
                merged, pieces = _box(write.get_ctx(), lo, hi), ((lo, hi),)  # type: ignore[arg-type]
        out[p.name] = _Accessed(read, write, merged, exact, pieces or (), any(a.kind == "atomic" for a in accesses))
    return out


def _union(accesses: list[Access], blocks: isl.Set) -> tuple[isl.Set | None, bool]:
    """The indices ``accesses`` may touch in ``blocks`` (None: none), and whether that set is
    exact (every one of them is certainly touched)."""
    ctx = blocks.get_ctx()
    union = None
    exact = True
    for a in accesses:
        e = a.elems[0]
        dom = a.domain & blocks.align_params(a.domain.space.params())
        if dom.is_empty():
            continue
        if e is None:  # an index isl cannot follow: anything
            s = isl.Set.universe(isl.Space.create_from_names(ctx, set=["i"]))
            exact = False
        else:
            s = isl.Map.from_pw_aff(e).intersect_domain(dom).range()
            s = s.set_dim_name(isl.dim_type.set, 0, "i").reset_tuple_id()
            exact = exact and a.exact and not _has_params(s, a)
            s = s.project_out_all_params()
        union = s if union is None else union | s
    if union is None or union.is_empty():
        return None, False
    return union.coalesce(), exact


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


def _bounded(s: isl.Set) -> bool:
    return _value(s.dim_min_val(0)) is not None and _value(s.dim_max_val(0)) is not None


def _box(ctx: isl.Context, lo: int | None, hi: int | None) -> isl.Set:
    lower = "" if lo is None else f"{lo} <= "
    upper = "" if hi is None else f" <= {hi}"
    return isl.Set(f"{{ [i] : {lower}i{upper} }}", context=ctx)


def _intervals(s: isl.Set) -> tuple[tuple[int, int], ...] | None:
    """The maximal intervals of a bounded 1-D set, in order; None if more than ``MAX_PIECES``."""
    ctx = s.get_ctx()
    starts = s - s.apply(isl.Map("{ [i] -> [i + 1] }", context=ctx))
    ends = s - s.apply(isl.Map("{ [i] -> [i - 1] }", context=ctx))
    if starts.count_val().to_python() > MAX_PIECES:
        return None
    return tuple(zip(_points(starts), _points(ends)))


def _points(s: isl.Set) -> list[int]:
    out: list[int] = []
    s.foreach_point(lambda p: out.append(int(p.get_coordinate_val(isl.dim_type.set, 0).to_python())))
    return sorted(out)


def _interval(s: isl.Set | None) -> Interval | None:
    if s is None:
        return None
    return Interval(_value(s.dim_min_val(0)), _value(s.dim_max_val(0)))


def _footprint(name: str, acc: _Accessed) -> RangeFootprint:
    return RangeFootprint(name, _interval(acc.read), _interval(acc.write), acc.exact, acc.atomic, acc.pieces)


def _check_independent(kernel: n.Kernel, ranges: tuple[BlockRange, ...], sets: list[dict[str, _Accessed]]) -> None:
    """Refuse ranges that share written memory: what two ranges merge back overlaps, or one range
    reads what another writes (atomics included: they may only update elements no other range
    touches)."""
    for p in kernel.params:
        if not isinstance(p.ptype, PointerType):
            continue
        name = p.name
        for i, si in enumerate(sets):
            f = si[name]
            if f.write is None:
                continue
            if f.merged is None or not _bounded(f.merged):
                raise UserError(f"kernel {kernel.name!r}: isl cannot bound the indices of {name!r} the blocks with "
                                f"{ranges[i]} write, so their writes cannot be merged back", p.loc)
            what = "atomic updates" if f.atomic else "writes"
            for j, sj in enumerate(sets):
                if j == i:
                    continue
                g = sj[name]
                if j > i and g.merged is not None and not (f.merged & g.merged).is_empty():
                    raise UserError(
                        f"kernel {kernel.name!r}: {what} of {name!r} by the blocks with {ranges[i]} (indices "
                        f"{_interval(f.merged)}) and by those with {ranges[j]} (indices {_interval(g.merged)}) may "
                        f"overlap; the ranges cannot run as separate tasks", p.loc)
                if g.read is not None and not (f.write & g.read).is_empty():
                    raise UserError(
                        f"kernel {kernel.name!r}: the blocks with {ranges[j]} read indices {_interval(g.read)} of "
                        f"{name!r}, which may overlap what the blocks with {ranges[i]} write "
                        f"({_interval(f.write)}); blocks that communicate through memory cannot run as separate "
                        f"tasks", p.loc)
