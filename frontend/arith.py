"""C arithmetic rules the frontend needs beyond what clang's AST spells out.

Clang makes most conversions explicit (implicit-cast nodes), but not the computation type of a
compound assignment (``c += 1`` on an ``unsigned char`` computes in ``int``), so the usual
arithmetic conversions are implemented here.
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.types import BOOL, F32, F64, I32, I64, U32, U64, ScalarType

_RANK = {"bool": 0, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 3, "u32": 3, "i64": 4, "u64": 4}


def promote(t: ScalarType) -> ScalarType:
    """Integer promotion: types narrower than int become int."""
    if t.is_int or t.is_bool:
        if _RANK[t.name] < _RANK["i32"]:
            return I32
    return t


def usual_arithmetic(a: ScalarType, b: ScalarType) -> ScalarType:
    """The common type of a binary arithmetic operation on ``a`` and ``b`` (C11 6.3.1.8)."""
    if a == F64 or b == F64:
        return F64
    if a == F32 or b == F32:
        return F32
    a, b = promote(a), promote(b)
    if a == b:
        return a
    if a.is_signed == b.is_signed:
        return a if _RANK[a.name] >= _RANK[b.name] else b
    unsigned, signed = (a, b) if not a.is_signed else (b, a)
    if _RANK[unsigned.name] >= _RANK[signed.name]:
        return unsigned
    if signed.bits > unsigned.bits:
        return signed
    return {"i32": U32, "i64": U64}[signed.name]


def convert(e: n.Expr, to: ScalarType) -> n.Expr:
    """``e`` converted to ``to`` (no node when the type already matches)."""
    if e.type == to:
        return e
    if isinstance(e, n.Const):
        from polypy.ir.semantics import eval_cast

        value = eval_cast(e.value, e.type, to)
        if value is not None:
            return n.Const(value, to, loc=e.loc)
    return n.Cast(to, e, loc=e.loc)


def truth(e: n.Expr) -> n.Expr:
    """``e`` as a condition (``!= 0``)."""
    return e if e.type == BOOL else convert(e, BOOL)


def add_offsets(a: n.Expr | None, b: n.Expr | None) -> n.Expr:
    """Sum of two element offsets (pointer arithmetic); mixed types meet in a 64-bit index. A
    ``bool`` offset (``p[i > 0]``, ``p + !flag``) is promoted to int first, as in C."""
    a, b = _offset(a), _offset(b)
    if a is None and b is None:
        return n.Const(0, I32)
    if a is None:
        return b  # type: ignore[return-value]
    if b is None:
        return a
    if isinstance(b, n.Const) and b.value == 0:
        return a
    if isinstance(a, n.Const) and a.value == 0:
        return b
    if a.type != b.type:
        a, b = convert(a, I64), convert(b, I64)
    return n.Binary("add", a, b, loc=b.loc)


def negated_offset(e: n.Expr) -> n.Expr:
    """``-e`` as an element offset (``p - e``, ``p -= e``): C moves the pointer back by the
    *value* of ``e``, so an integer narrower than 64 bits other than ``int`` is widened to
    ``long`` first: negated in its own type, an ``unsigned`` would wrap (``p - threadIdx.x``
    would move ``2**32 - threadIdx.x`` elements forward)."""
    if e.type.is_bool or (e.type.is_int and e.type.bits < 64 and e.type != I32):
        e = convert(e, I64)
    return n.Unary("neg", e, loc=e.loc)


def _offset(e: n.Expr | None) -> n.Expr | None:
    return convert(e, promote(e.type)) if e is not None and e.type == BOOL else e


def split_constant(e: n.Expr) -> tuple[n.Expr | None, int]:
    """``e`` as ``rest + c`` with ``c`` an integer constant (``rest`` None for a constant ``e``):
    how ``plus`` and ``add_offsets`` spell consecutive elements, ``b``, ``b + 1``..."""
    if isinstance(e, n.Const) and isinstance(e.value, int):
        return None, int(e.value)
    if isinstance(e, n.Binary) and e.op == "add" and isinstance(e.b, n.Const) and isinstance(e.b.value, int):
        rest, c = split_constant(e.a)
        return rest, c + int(e.b.value)
    return e, 0


def scale(e: n.Expr, factor: int) -> n.Expr:
    if factor == 1:
        return e
    return n.Binary("mul", e, n.Const(factor, e.type), loc=e.loc)


def plus(e: n.Expr, k: int) -> n.Expr:
    if k == 0:
        return e
    return n.Binary("add", e, n.Const(k, e.type), loc=e.loc)
