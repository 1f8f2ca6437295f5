"""Shapes of GPU index expressions the model builder recognizes (``polypy.poly.builder``):
block strides (``blockIdx.x * blockDim.x``), grid-stride loops, products with ``blockIdx``,
the summands and factors of sums and products of one type; all up to integer casts."""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.types import U32, U64
from polypy.ir.visitor import walk


def block_stride(e: n.Expr) -> tuple[int, int, int] | None:
    """``(d, e, c)`` if ``e`` is ``blockIdx[d] * (c * blockDim[e])`` up to casts and order."""
    e = strip_int_casts(e)
    if not (isinstance(e, n.Binary) and e.op == "mul"):
        return None
    for a, b in ((e.a, e.b), (e.b, e.a)):
        a, b = strip_int_casts(a), strip_int_casts(b)
        if not isinstance(a, n.BlockIdx):
            continue
        if isinstance(b, n.BlockDim):
            return (a.dim, b.dim, 1)
        if isinstance(b, n.Binary) and b.op == "mul":
            x, y = strip_int_casts(b.a), strip_int_casts(b.b)
            for p, q in ((x, y), (y, x)):
                if isinstance(p, n.BlockDim) and isinstance(q, n.Const) and int(q.value) > 0:
                    return (a.dim, p.dim, int(q.value))
    return None


def linear_block_stride(e: n.Expr) -> tuple[int, int, int, int] | None:
    """``(a, b, e, c)`` if ``e`` is ``c * blockDim[e] * (gridDim[a] * blockIdx[b] + blockIdx[a])``
    (``a != b``, ``c > 0``) up to integer casts and order: ``c * blockDim[e]`` times the row-major
    index of the block in the plane ``(a, b)`` of the grid (Rodinia's ``blockDim.x * (gridDim.x *
    blockIdx.y + blockIdx.x)``). As ``0 <= blockIdx[a] < gridDim[a]``, that index differs between
    two blocks that differ along ``a`` or ``b``, so the value does by ``c * blockDim[e]`` or more."""
    e = strip_int_casts(e)
    factors = [strip_int_casts(f) for f in _int_factors(e)]
    dims = [f.dim for f in factors if isinstance(f, n.BlockDim)]
    consts = [int(f.value) for f in factors if isinstance(f, n.Const)]
    sums = [f for f in factors if not isinstance(f, (n.BlockDim, n.Const))]
    if len(dims) != 1 or len(sums) != 1 or any(k <= 0 for k in consts):
        return None
    plane = _linear_block_index(sums[0])
    if plane is None:
        return None
    c = 1
    for k in consts:
        c *= k
    return plane[0], plane[1], dims[0], c


def _int_factors(e: n.Expr) -> list[n.Expr]:
    """The factors of a product of integers, through integer casts."""
    e = strip_int_casts(e)
    if isinstance(e, n.Binary) and e.op == "mul" and e.type.is_int:
        return _int_factors(e.a) + _int_factors(e.b)
    return [e]


def _linear_block_index(e: n.Expr) -> tuple[int, int] | None:
    """``(a, b)`` if ``e`` is ``gridDim[a] * blockIdx[b] + blockIdx[a]`` (``a != b``) up to casts and order."""
    e = strip_int_casts(e)
    if not (isinstance(e, n.Binary) and e.op == "add"):
        return None
    for x, y in ((e.a, e.b), (e.b, e.a)):
        x, y = strip_int_casts(x), strip_int_casts(y)
        if not isinstance(x, n.BlockIdx):
            continue
        factors = [strip_int_casts(f) for f in _int_factors(y)]
        if len(factors) != 2:
            continue
        for g, bi in (factors, factors[::-1]):
            if isinstance(g, n.GridDim) and isinstance(bi, n.BlockIdx) and g.dim == x.dim and bi.dim != x.dim:
                return x.dim, bi.dim
    return None


def is_grid_stride(start: n.Expr, step: n.Expr) -> bool:
    """``start`` is ``blockIdx[d] * blockDim[e] + threadIdx[e]`` and ``step`` is ``blockDim[e] *
    gridDim[d]`` (up to integer casts): a grid-stride loop, ``0 <= start < step``. Both sums are
    below ``2**31`` by the model's assumption, so the casts change no value."""
    start, step = strip_int_casts(start), strip_int_casts(step)
    if not (isinstance(start, n.Binary) and start.op == "add" and isinstance(step, n.Binary) and step.op == "mul"):
        return False
    for a, b in ((start.a, start.b), (start.b, start.a)):
        a, b = strip_int_casts(a), strip_int_casts(b)
        if not (isinstance(b, n.ThreadIdx) and isinstance(a, n.Binary) and a.op == "mul"):
            continue
        for x, y in ((a.a, a.b), (a.b, a.a)):
            x, y = strip_int_casts(x), strip_int_casts(y)
            if isinstance(x, n.BlockIdx) and isinstance(y, n.BlockDim) and y.dim == b.dim:
                stripped = [strip_int_casts(f) for f in (step.a, step.b)]
                factors = {(type(f), getattr(f, "dim", None)) for f in stripped}
                if factors == {(n.BlockDim, b.dim), (n.GridDim, x.dim)}:
                    return True
    return False


def block_factor(e: n.Expr | None) -> tuple[int, n.Expr] | None:
    """``(d, P)`` if ``e`` is the signed product ``blockIdx[d] * P`` (``blockIdx`` possibly cast),
    ``P`` without ``blockIdx``."""
    if e is None:
        return None
    if not (isinstance(e, n.Binary) and e.op == "mul" and e.type.is_signed):
        return None
    for a, b in ((e.a, e.b), (e.b, e.a)):
        if isinstance(strip_int_casts(a), n.BlockIdx) and not any(isinstance(x, n.BlockIdx) for x in walk(b)):
            return strip_int_casts(a).dim, b  # type: ignore[union-attr]
    return None


def wrapping_block_factor(e: n.Expr | None) -> tuple[int, n.Expr] | None:
    """``(d, P)`` if ``e`` is the unsigned product ``blockIdx[d] * P`` of at most 32 bits
    (``blockIdx.x * (unsigned)cols``), ``P`` without ``blockIdx``: unlike a signed one it may wrap."""
    if e is None or not (isinstance(e, n.Binary) and e.op == "mul" and e.type.is_int
                         and not e.type.is_signed and e.type.bits <= 32):
        return None
    for a, b in ((e.a, e.b), (e.b, e.a)):
        if isinstance(strip_int_casts(a), n.BlockIdx) and not any(isinstance(x, n.BlockIdx) for x in walk(b)):
            return strip_int_casts(a).dim, b  # type: ignore[union-attr]
    return None


def last_block_product(d: int, p: n.Expr) -> n.Expr:
    """``(u64)(gridDim[d] - 1) * (u64)P``: the largest ``blockIdx[d] * P`` of a launch, computed
    without wrapping (both factors are below ``2**32``)."""
    last = n.Binary("sub", n.GridDim(d), n.Const(1, U32))  # gridDim >= 1
    return n.Binary("mul", n.Cast(U64, last), n.Cast(U64, p))


def signed_terms(e: n.Expr, sign: int) -> list[tuple[int, n.Expr]]:
    """The summands of a chain of ``+``/``-`` of one signed type, with their signs."""
    if isinstance(e, n.Binary) and e.op in ("add", "sub") and e.type == e.a.type == e.b.type:
        return signed_terms(e.a, sign) + signed_terms(e.b, sign if e.op == "add" else -sign)
    return [(sign, e)]


def product_factors(e: n.Expr) -> list[n.Expr]:
    if isinstance(e, n.Binary) and e.op == "mul" and e.type == e.a.type == e.b.type:
        return product_factors(e.a) + product_factors(e.b)
    return [e]


def strip_int_casts(e: n.Expr) -> n.Expr:
    while isinstance(e, n.Cast) and e.to.is_int and e.x.type.is_int:
        e = e.x
    return e

