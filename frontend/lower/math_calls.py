"""Calls of CUDA's math library that the frontend writes in IR itself: ``frexp``/``ldexp``/``modf``
(``frontend.lower.float_parts``), the functions of ``frontend.lower.more_math`` (``remainder``,
``sinpif``, the double and Bessel forms...), and ``__fdividef`` (docs/math.md)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import F32, I32

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.lower.float_parts import FloatParts
from frontend.lower.helpers import ArrayRef
from frontend.lower.more_math import FLOAT_ARGS, MORE_MATH, MoreMath

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def float_part(kb: KernelBuilder, what: str, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
    """``frexp``, ``ldexp``, ``modf`` (``frontend.lower.float_parts``): the result, and for
    ``frexp``/``modf`` the second result stored through the pointer argument."""
    loc = kb.loc(c)
    rt = tm.scalar_type(fn.result_type)
    if rt is None or not rt.is_float:
        raise kb.error(f"unsupported use of '{fn.spelling}'", c)

    let = kb.binder(c)

    parts = FloatParts(let, loc)
    x = let(convert(kb.scalar(args[0]), rt), "x")
    if what == "ldexp":
        return parts.ldexp(x, convert(kb.scalar(args[1]), I32))
    value, second = parts.frexp(x) if what == "frexp" else parts.modf(x)
    target = kb.expr(args[1])
    lv = kb.deref(target if not isinstance(target, ArrayRef) else target.decay(kb), c)
    kb.assign(lv, second, c)
    return value


def more_math(kb: KernelBuilder, name: str, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr | None:
    """``remainder``, ``ilogb``, ``lrint``, ``sinpif``... (``frontend.lower.more_math``); the results
    ``remquo`` and ``sincospi`` give through pointers are stored here."""
    what, precision = MORE_MATH[name]
    params = list(fn.get_arguments())
    rt = tm.scalar_type(tm.strip_reference(fn.result_type))
    # The precision: the result's where it is a float (C++'s mixed `remainder(float, double)` and
    # integer overloads compute in it), else the first parameter's (`ilogb`, `lrint`, `sincospi`).
    ty = precision or (rt if rt is not None and rt.is_float else
                       tm.scalar_type(tm.strip_reference(params[0].type)) if params else None)
    if ty is None or not ty.is_float:
        raise kb.error(f"'{name}' on integers is not supported", c)

    let = kb.binder(c)

    def store(target_c: ci.Cursor, value: n.Expr) -> None:
        target = kb.expr(target_c)
        kb.assign(kb.deref(target if not isinstance(target, ArrayRef) else target.decay(kb), c), value, c)

    lib = MoreMath(let, kb.loc(c))
    count = FLOAT_ARGS.get(what, 1)
    xs = [let(convert(kb.scalar(a), ty), "x") for a in args[:count]]
    if what == "remquo":
        value, quo = lib.remquo(xs[0], xs[1])
        store(args[2], quo)
        return value
    if what == "sincospi":
        s, co = lib.sin_cos_pi(xs[0])
        store(args[1], s)
        store(args[2], co)
        return None
    result = lib.value(what, xs, [kb.scalar(a) for a in args[count:]])
    return convert(result, rt) if rt is not None else result


def fast_divide(kb: KernelBuilder, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
    """``__fdividef(x, y)``: ``x / y`` (within CUDA's 2 ulp), except where CUDA documents another
    value: for 2^126 < |y| < 2^128 it is ``x`` times a zero (its reciprocal flushed, with y's
    sign): a signed zero, NaN for an infinite or NaN ``x``."""
    loc = kb.loc(c)
    x = kb.temp(F32, convert(kb.scalar(args[0]), F32), "fdx", c)
    y = kb.temp(F32, convert(kb.scalar(args[1]), F32), "fdy", c)
    xv, yv = n.Var(x.name, F32, loc=loc), n.Var(y.name, F32, loc=loc)
    mag = n.Call("fabs", (yv,), F32, loc=loc)
    huge = n.Binary("land", n.Binary("gt", mag, n.Const(2.0 ** 126, F32), loc=loc),
                    n.Binary("lt", mag, n.Const(2.0 ** 128, F32), loc=loc), loc=loc)
    flushed = n.Binary("mul", xv, n.Call("copysign", (n.Const(0.0, F32), yv), F32, loc=loc), loc=loc)
    return n.Select(huge, flushed, n.Binary("div", xv, yv, loc=loc), loc=loc)
