"""The default arguments of a kernel, passed by a ``<<<...>>>`` launch that leaves them out.

A launch's arguments are host text (``polypy.ir.host.LaunchSite``); a default is evaluated where
the kernel declares it, so polypy spells its value rather than its text: a number (in the
parameter's type), a null pointer (``NULL``, ``nullptr``, ``0``) or a value-initialized object
(``Op op = Op()``, ``S s = {}``). Any other default is refused at the launch.
"""
from __future__ import annotations

import math

import clang.cindex as ci

from polypy.errors import Loc, UserError

from frontend.clang_setup import evaluate


def default_argument(call: ci.Cursor, index: int, loc: Loc | None) -> str:
    """The text a launch passes for the kernel's default argument ``index``: its value, when the
    default is a constant (a number, or a null pointer: ``NULL``, ``nullptr``, ``0``); anything else
    is refused at the launch (a default is evaluated where it is declared, which a text spelled at
    the launch would not be)."""
    fn = call.referenced
    params = list(fn.get_arguments()) if fn is not None else []
    expr = next((ch for ch in params[index].get_children() if ch.kind.is_expression()), None) \
        if index < len(params) else None
    if expr is None:
        raise UserError("a default argument of this kernel polypy cannot find", loc)
    ptype = params[index].type.get_canonical()
    inner = expr
    while inner.kind == ci.CursorKind.UNEXPOSED_EXPR and len(list(inner.get_children())) == 1:
        inner = next(inner.get_children())
    value = evaluate(expr)
    if ptype.kind == ci.TypeKind.POINTER:
        if inner.kind in (ci.CursorKind.GNU_NULL_EXPR, ci.CursorKind.CXX_NULL_PTR_LITERAL_EXPR) or value == 0:
            return "nullptr"
    elif isinstance(value, float) and math.isfinite(value):
        return f"(({ptype.spelling}){value.hex()})"
    elif isinstance(value, int):
        return f"(({ptype.spelling}){value}{'ULL' if value >= 2 ** 63 else 'LL'})"
    elif ptype.kind == ci.TypeKind.RECORD and _value_initialized(inner):
        # `Op op = Op()`, `Scale s = {}`, `Scale s = Scale{}`: a value-initialized object is the
        # same wherever it is made (a function object's default; its constructor, if any, runs).
        return f"{ptype.spelling}()" if inner.kind == ci.CursorKind.CALL_EXPR else f"{ptype.spelling}{{}}"
    raise UserError(f"the default argument of kernel parameter '{params[index].spelling}' is not a constant "
                    "(polypy passes constant defaults only: numbers, null pointers and value-initialized objects)", loc)


def _value_initialized(expr: ci.Cursor) -> bool:
    """Whether ``expr`` makes an object with no initializer values: ``T()`` (a constructor call
    without arguments), ``{}`` or ``T{}``."""
    children = [c for c in expr.get_children() if c.kind != ci.CursorKind.TYPE_REF]
    if expr.kind == ci.CursorKind.CALL_EXPR:
        ctor = expr.referenced
        return not children and ctor is not None and ctor.kind == ci.CursorKind.CONSTRUCTOR
    if expr.kind == ci.CursorKind.CXX_FUNCTIONAL_CAST_EXPR and len(children) == 1:
        expr, children = children[0], list(children[0].get_children())
    return expr.kind == ci.CursorKind.INIT_LIST_EXPR and not children
