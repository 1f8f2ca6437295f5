"""Footprints: which indices of each pointer parameter a launch reads and writes.

``footprint(kernel, grid, block, scalars)`` builds the model for that launch (block and grid
dimensions and integer scalar arguments become constants, so ``blockIdx.x * blockDim.x`` and
``row * n`` are affine) and returns, per pointer parameter, the smallest and largest index read
and written. The Python API calls it before a launch (with ``shared=True``: shared arrays too) to
prove that the launch stays inside its arrays, refuse one that certainly does not, or else run a
bounds-checked version of the kernel.

A bound is ``None`` when isl cannot bound it (an index loaded from memory, say). ``exact``
says the bounds are attained by accesses that certainly happen with exactly those indices;
otherwise the range is a sound over-approximation (every real access is inside it).
Atomics count as reads and writes. Floating-point scalars are irrelevant and ignored.
Each footprint also lists its accesses one by one (``Footprint.accesses``: kind, source location
and index range), so that a launch that certainly goes out of bounds can name the line.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

import islpy as isl

from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.types import PointerType
from polypy.poly.affine import int_range
from polypy.poly.model import Access, Launch, Model, build_model
from polypy.poly.paths import statement_accesses, statement_at


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
class AccessRange:
    """The (linear) indices one access may touch in a launch.

    ``range.exact``: both bounds are certainly touched: the access's domain and index are exact
    and depend on nothing the launch leaves unknown (else the range is a sound
    over-approximation).
    """

    kind: str  # "read" | "write" | "atomic"
    loc: Loc | None
    text: str
    range: IndexRange


@dataclasses.dataclass(frozen=True)
class Footprint:
    """Indices of one pointer parameter read and written by one launch (None: never)."""

    param: str
    read: IndexRange | None
    write: IndexRange | None
    space: str = "global"  # "shared" for a shared array (``footprint(..., shared=True)``)
    accesses: tuple[AccessRange, ...] = dataclasses.field(default=(), compare=False, repr=False)

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


def _elements(a: Access, shape: tuple[int, ...] | None = None) -> isl.Set:
    """The indices ``a`` may touch (a 1-D set, parameters kept); the row-major linear index of
    an array of constant ``shape``."""
    e = a.elems[0]
    if shape is not None and len(a.elems) > 1:
        if len(shape) != len(a.elems) or any(x is None for x in a.elems):
            e = None
        else:
            for extent, x in zip(shape[1:], a.elems[1:]):
                e = e.scale_val(isl.Val(extent)) + x  # type: ignore[union-attr]
    if e is None:
        return isl.Set.universe(isl.Space.create_from_names(a.domain.get_ctx(), set=["i"]))
    m = isl.Map.from_pw_aff(e).intersect_domain(a.domain)
    return m.range().set_dim_name(isl.dim_type.set, 0, "i").reset_tuple_id()


def _access_range(a: Access, shape: tuple[int, ...] | None = None,
                  kernel: n.Kernel | None = None) -> AccessRange | None:
    """The range of one access (None: it never happens in this launch). An index isl cannot
    bound is bounded by its type where that says more (``local[data[i]]`` with ``unsigned char``
    data: [0, 255]); ``kernel``: the kernel of the model, to find the index expression."""
    lo, hi = _bounds([_elements(a, shape).project_out_all_params()])
    if lo == "empty":
        return None
    if (lo is None or hi is None) and kernel is not None and len(a.elems) == 1:
        index = statement_accesses(statement_at(kernel, a.id.path))[a.id.index].indices[0]
        tlo, thi = _type_bounds(index)
        # The full range of an int or wider says nothing useful: the index stays unknown.
        if index.type.bits < 32 or (tlo, thi) != int_range(index.type):
            lo = tlo if lo is None else max(lo, tlo)  # type: ignore[type-var]
            hi = thi if hi is None else min(hi, thi)  # type: ignore[type-var]
    exact = a.exact and lo is not None and hi is not None and _fixed(a)
    return AccessRange(a.kind, a.loc, a.text, IndexRange(lo, hi, exact))  # type: ignore[arg-type]


def _type_bounds(e: n.Expr) -> tuple[int, int]:
    """Sound bounds of an integer index from its type and the types it was converted from."""
    full = int_range(e.type)
    if isinstance(e, n.Const):
        return int(e.value), int(e.value)  # type: ignore[arg-type]
    if isinstance(e, n.Cast) and (e.x.type.is_int or e.x.type.is_bool):
        inner = _type_bounds(e.x)
        if full[0] <= inner[0] and inner[1] <= full[1]:
            return inner  # a conversion that keeps every value
    return full


def _combine(ranges: list[AccessRange]) -> IndexRange | None:
    """The range of several accesses: exact when exact accesses attain both bounds."""
    if not ranges:
        return None
    rs = [r.range for r in ranges]
    lo = None if any(r.lo is None for r in rs) else min(r.lo for r in rs)  # type: ignore[type-var]
    hi = None if any(r.hi is None for r in rs) else max(r.hi for r in rs)  # type: ignore[type-var]
    exact_rs = [r for r in rs if r.exact]
    exact = (bool(exact_rs) and lo is not None and hi is not None
             and min(r.lo for r in exact_rs) == lo and max(r.hi for r in exact_rs) == hi)  # type: ignore[type-var]
    return IndexRange(lo, hi, exact)


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
              scalars: Mapping[str, int | float] | None = None, *, shmem: int = 0,
              shared: bool = False) -> dict[str, Footprint]:
    """Per pointer parameter, the index ranges read and written by this launch.

    ``shared``: shared arrays too (``space == "shared"``; a multi-dimensional one by its
    row-major linear index; the ``extern __shared__`` one whatever ``shmem`` is). Their ranges
    are what the kernel does, not what a valid kernel may do: the model assumes accesses to
    fixed-size arrays stay in bounds, so they are measured on a copy of the kernel in which
    every shared array is a pointer parameter (see ``_shared_as_pointers``).
    ``shmem`` (dynamic shared bytes) changes no footprint; it is accepted so the launch is
    described completely.
    """
    del shmem
    launch = Launch.of(grid, block, scalars)
    if not shared or not any(b.space == "shared" for b in kernel.buffers):
        return footprints_of(build_model(kernel, launch=launch))
    variant = _shared_as_pointers(kernel)
    out = footprints_of(build_model(variant, launch=launch),
                        shapes={b.name: _const_shape(b) for b in kernel.buffers if b.space == "shared"})
    return out


def footprints_of(model: Model, *, shapes: Mapping[str, tuple[int, ...] | None] | None = None) -> dict[str, Footprint]:
    """Footprints of the pointer parameters of ``model``; ``shapes``: those that stand for shared
    arrays (their constant shapes, None for the extern one)."""
    shapes = shapes or {}
    out = {}
    for name in _pointer_params(model.kernel):
        shape = shapes.get(name)
        ranges = [r for r in (_access_range(a, shape, model.kernel) for a in model.accesses_of(name)) if r is not None]
        out[name] = Footprint(name, _combine([r for r in ranges if r.kind in ("read", "atomic")]),
                              _combine([r for r in ranges if r.kind in ("write", "atomic")]),
                              space="shared" if name in shapes else "global", accesses=tuple(ranges))
    return out


def _const_shape(b: n.Buffer) -> tuple[int, ...] | None:
    if b.shape is None or not all(isinstance(d, n.Const) for d in b.shape):
        return None
    return tuple(int(d.value) for d in b.shape)  # type: ignore[union-attr]


# A cache of shared-as-pointer copies per kernel object (kernels are immutable; the model cache
# is keyed by kernel identity, so the copy must be the same object each time).
_VARIANT_CACHE: dict[int, tuple[n.Kernel, n.Kernel]] = {}
_VARIANT_CACHE_SIZE = 64


def _shared_as_pointers(kernel: n.Kernel) -> n.Kernel:
    """``kernel`` with every shared array turned into a pointer parameter of the same name.

    The model clamps the domain of an access to a fixed-size array to the array's bounds (an
    out-of-bounds access is undefined behaviour, so a valid kernel never makes one); a pointer
    parameter has no bounds, so this copy shows the indices the kernel really uses.
    """
    hit = _VARIANT_CACHE.get(id(kernel))
    if hit is not None and hit[0] is kernel:
        return hit[1]
    shared = [b for b in kernel.buffers if b.space == "shared"]
    params = kernel.params + tuple(n.Param(b.name, PointerType(b.elem), loc=b.loc) for b in shared)
    variant = dataclasses.replace(kernel, params=params,
                                  buffers=tuple(b for b in kernel.buffers if b.space != "shared"))
    if len(_VARIANT_CACHE) >= _VARIANT_CACHE_SIZE:
        _VARIANT_CACHE.pop(next(iter(_VARIANT_CACHE)))
    _VARIANT_CACHE[id(kernel)] = (kernel, variant)
    return variant


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
