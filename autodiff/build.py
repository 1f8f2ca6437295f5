"""Small expression builders with the obvious simplifications, used by the derivative code.

They keep generated code readable (no ``x * 1.0``, no ``0.0 + x``, ``c ? x : 0`` instead of
``x * (c ? 1 : 0)``); anything subtler is left to ``fold_constants`` after differentiation.
Float identities used here hold for derivative code only in the usual AD sense (``0 * inf``
is treated as 0: a zero partial contributes nothing), exactly as in JAX and Enzyme.
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, ScalarType


def const(value: int | float | bool, ty: ScalarType) -> n.Const:
    return n.Const(value, ty)


def one(ty: ScalarType) -> n.Const:
    return n.Const(1, ty) if not ty.is_float else n.Const(1.0, ty)


def zero(ty: ScalarType) -> n.Const:
    return n.Const(0, ty) if not ty.is_float else n.Const(0.0, ty)


def is_const(e: n.Expr, value: float) -> bool:
    return isinstance(e, n.Const) and not isinstance(e.value, bool) and e.value == value


def _indicator(e: n.Expr) -> tuple[n.Expr, bool] | None:
    """``c ? 1 : 0`` -> (c, True); ``c ? 0 : 1`` -> (c, False)."""
    if isinstance(e, n.Select) and isinstance(e.a, n.Const) and isinstance(e.b, n.Const):
        if is_const(e.a, 1) and is_const(e.b, 0):
            return e.cond, True
        if is_const(e.a, 0) and is_const(e.b, 1):
            return e.cond, False
    return None


def mul(a: n.Expr, b: n.Expr) -> n.Expr:
    if is_const(a, 1):
        return b
    if is_const(b, 1):
        return a
    if is_const(a, -1):
        return neg(b)
    if is_const(b, -1):
        return neg(a)
    for x, y in ((a, b), (b, a)):
        ind = _indicator(y)
        if ind is not None:
            cond, when = ind
            return n.Select(cond, x, zero(x.type)) if when else n.Select(cond, zero(x.type), x)
    return n.Binary("mul", a, b)


def add(a: n.Expr, b: n.Expr) -> n.Expr:
    if is_const(a, 0) and not a.type.is_float:
        return b
    if is_const(b, 0) and not b.type.is_float:
        return a
    if isinstance(b, n.Unary) and b.op == "neg":
        return n.Binary("sub", a, b.x)
    return n.Binary("add", a, b)


def sub(a: n.Expr, b: n.Expr) -> n.Expr:
    if isinstance(b, n.Unary) and b.op == "neg":
        return n.Binary("add", a, b.x)
    if isinstance(b, n.Const) and b.type.is_int and b.type.is_signed and b.value < 0 and -b.value != b.value:
        return n.Binary("add", a, n.Const(-b.value, b.type))
    return n.Binary("sub", a, b)


def div(a: n.Expr, b: n.Expr) -> n.Expr:
    if is_const(b, 1):
        return a
    return n.Binary("div", a, b)


def neg(a: n.Expr) -> n.Expr:
    if isinstance(a, n.Unary) and a.op == "neg":
        return a.x
    if isinstance(a, n.Const) and a.type.is_float:
        return n.Const(-a.value, a.type)
    return n.Unary("neg", a)


def call(fn: str, *args: n.Expr) -> n.Call:
    return n.Call(fn, tuple(args), args[0].type)


def pred(fn: str, x: n.Expr) -> n.Call:
    return n.Call(fn, (x,), BOOL)


def cmp(op: str, a: n.Expr, b: n.Expr) -> n.Binary:
    return n.Binary(op, a, b)


def land(a: n.Expr, b: n.Expr) -> n.Expr:
    return n.Binary("land", a, b)


def lor(a: n.Expr, b: n.Expr) -> n.Expr:
    return n.Binary("lor", a, b)


def lnot(a: n.Expr) -> n.Expr:
    return n.Unary("not", a)


def select(c: n.Expr, a: n.Expr, b: n.Expr) -> n.Expr:
    if isinstance(c, n.Const):
        return a if c.value else b
    return n.Select(c, a, b)


def cast(to: ScalarType, x: n.Expr) -> n.Expr:
    if x.type == to:
        return x
    if isinstance(x, n.Const):
        return n.Const(x.value, to) if not (to.is_int and x.type.is_float) else n.Cast(to, x)
    return n.Cast(to, x)


def i32(x: n.Expr) -> n.Expr:
    return cast(I32, x)


def var(name: str, ty: ScalarType) -> n.Var:
    return n.Var(name, ty)
