"""Footprints: which indices of each pointer parameter a launch reads and writes.

``footprint(kernel, grid, block, scalars)`` builds the model for that launch (block and grid
dimensions and integer scalar arguments become constants, so ``blockIdx.x * blockDim.x`` and
``row * n`` are affine) and returns, per pointer parameter, the smallest and largest index read
and written. The Python API calls it before a launch to refuse arrays that are too small.

A bound is ``None`` when isl cannot bound it (an index loaded from memory, say). ``exact``
says the bounds are attained by accesses that certainly happen with exactly those indices;
otherwise the range is a sound over-approximation (every real access is inside it).
Atomics count as reads and writes. Floating-point scalars are irrelevant and ignored.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

import islpy as isl

from polypy.ir import nodes as n
from polypy.ir.types import PointerType
from polypy.poly.model import Access, Launch, Model, build_model


@dataclasses.dataclass(frozen=True)
class IndexRange:
    """Indices ``lo..hi`` (inclusive); None: unbounded or unknown on that side."""

    lo: int | None
    hi: int | None
    exact: bool

    @property
    def bounded(self) -> bool:
        return self.lo is not None and self.hi is not None

    def __str__(self) -> str:
        lo = "-inf" if self.lo is None else str(self.lo)
        hi = "+inf" if self.hi is None else str(self.hi)
        return f"[{lo}, {hi}]" + ("" if self.exact else " (over-approximated)")


@dataclasses.dataclass(frozen=True)
class Footprint:
    """Indices of one pointer parameter read and written by one launch (None: never)."""

    param: str
    read: IndexRange | None
    write: IndexRange | None

    @property
    def touched(self) -> IndexRange | None:
        ranges = [r for r in (self.read, self.write) if r is not None]
        if not ranges:
            return None
        lo = None if any(r.lo is None for r in ranges) else min(r.lo for r in ranges)  # type: ignore[type-var]
        hi = None if any(r.hi is None for r in ranges) else max(r.hi for r in ranges)  # type: ignore[type-var]
        return IndexRange(lo, hi, all(r.exact for r in ranges))

    @property
    def required_size(self) -> int | None:
        """The number of elements the array needs (0 if untouched, None if unknown)."""
        t = self.touched
        if t is None:
            return 0
        if t.hi is None:
            return None
        return max(t.hi + 1, 0)

    def fits(self, size: int) -> bool | None:
        """Whether an array of ``size`` elements is large enough (None: cannot tell)."""
        t = self.touched
        if t is None:
            return True
        if t.lo is None or t.hi is None:
            return None
        return t.lo >= 0 and t.hi < size


def _elements(a: Access) -> isl.Set:
    """The indices ``a`` may touch (a 1-D set, parameters kept)."""
    e = a.elems[0]
    if e is None:
        return isl.Set.universe(isl.Space.create_from_names(a.domain.get_ctx(), set=["i"]))
    m = isl.Map.from_pw_aff(e).intersect_domain(a.domain)
    return m.range().set_dim_name(isl.dim_type.set, 0, "i").reset_tuple_id()


def _range(accesses: list[Access]) -> IndexRange | None:
    if not accesses:
        return None
    sets = [_elements(a).project_out_all_params() for a in accesses]
    lo, hi = _bounds(sets)
    if lo == "empty":
        return None
    exact_sets = [s for s, a in zip(sets, accesses) if a.exact]
    exact = False
    if exact_sets and lo is not None and hi is not None:
        elo, ehi = _bounds(exact_sets)
        exact = (elo, ehi) == (lo, hi) and all(_fixed(a) for a in accesses if a.exact)
    return IndexRange(lo, hi, exact)  # type: ignore[arg-type]


def _fixed(a: Access) -> bool:
    """Whether the access depends on no unknown left by the launch (e.g. a loop trip count)."""
    objects = [a.domain] + [e for e in a.elems if e is not None]
    for obj in objects:
        for pos in range(obj.dim(isl.dim_type.param)):
            if obj.involves_dims(isl.dim_type.param, pos, 1):
                return False
    return True


def _bounds(sets: list[isl.Set]) -> tuple[int | None | str, int | None | str]:
    union = sets[0]
    for s in sets[1:]:
        union = union | s
    if union.is_empty():
        return "empty", "empty"
    lo = union.dim_min_val(0)
    hi = union.dim_max_val(0)
    return _value(lo), _value(hi)


def _value(v: isl.Val) -> int | None:
    if v.is_infty() or v.is_neginfty() or v.is_nan():
        return None
    return int(v.to_python())


def _pointer_params(kernel: n.Kernel) -> list[str]:
    return [p.name for p in kernel.params if isinstance(p.ptype, PointerType)]


def footprint(kernel: n.Kernel, grid: int | tuple[int, ...], block: int | tuple[int, ...],
              scalars: Mapping[str, int | float] | None = None, *, shmem: int = 0) -> dict[str, Footprint]:
    """Per pointer parameter, the index ranges read and written by this launch.

    ``shmem`` (dynamic shared bytes) does not change global footprints; it is accepted so the
    launch is described completely.
    """
    del shmem
    model = build_model(kernel, launch=Launch.of(grid, block, scalars))
    return footprints_of(model)


def footprints_of(model: Model) -> dict[str, Footprint]:
    out = {}
    for name in _pointer_params(model.kernel):
        accesses = model.accesses_of(name)
        out[name] = Footprint(name, _range([a for a in accesses if a.reads]),
                              _range([a for a in accesses if a.writes]))
    return out


def symbolic_footprint(kernel: n.Kernel) -> dict[str, tuple[str | None, str | None]]:
    """Per pointer parameter, the isl sets of indices read and written, as functions of the
    launch shape and scalar arguments (text; None: never accessed)."""
    model = build_model(kernel)
    out = {}
    for name in _pointer_params(kernel):
        accesses = model.accesses_of(name)
        texts = []
        for want in ("reads", "writes"):
            chosen = [a for a in accesses if getattr(a, want)]
            if not chosen:
                texts.append(None)
                continue
            union = _elements(chosen[0])
            for a in chosen[1:]:
                union = union | _elements(a)
            texts.append(str(union.gist_params(model.context).coalesce().set_tuple_name(name)))
        out[name] = (texts[0], texts[1])
    return out
