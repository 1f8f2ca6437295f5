"""CUDA's ``norm(dim, p)``, ``rnorm(dim, p)``, ``normf``, ``rnormf``: the Euclidean norm of the
``dim`` elements at ``p`` (and its reciprocal) in device code, two loops over the elements.

Float: the squares (exact in double) summed in double, the square root rounded once to float (the
double sum's error stays far below half a float ulp for any practical ``dim``). Double: a first
loop finds the largest magnitude (``frexp``'s exponent ``e``), a second sums the squares of the
elements scaled by ``2^-e`` (exact unless a part below ``2^-1074`` of the largest is lost) in
double-double; the square root (reciprocal square root) of the sum is corrected by a Newton step in
double-double and scaled back (``DoubleMath.root_of_sum``). An infinite element gives ``+inf``
(``rnorm``: ``+0``) even with a NaN, else a NaN element NaN; ``dim <= 0`` or all zeros give ``+0``
(``rnorm``: ``+inf``).
"""
from __future__ import annotations

import math

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import BOOL, F64, I32

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.lower.double_math import DoubleMath
from frontend.lower.helpers import ArrayRef
from frontend.lower.more_math import MoreMath

NORM_ARRAY = ("norm", "normf", "rnorm", "rnormf")


def norm_array(kb, name: str, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
    loc = kb.loc(c)
    rt = tm.scalar_type(fn.result_type)
    if rt is None or not rt.is_float or len(args) != 2:
        raise kb.error(f"unsupported use of '{name}'", c)
    reciprocal = name.startswith("r")

    let = kb.binder(c)

    def var(init: n.Expr, base: str) -> tuple[str, n.Expr]:
        v = kb.temp(init.type, init, base, c)
        return v.name, n.Var(v.name, v.type, loc=loc)

    dm = DoubleMath(MoreMath(let, loc))
    count = let(convert(kb.scalar(args[0]), I32), "dim")
    target = kb.expr(args[1])
    ptr = target.decay(kb) if isinstance(target, ArrayRef) else target

    def loop(body_of) -> None:
        j = kb.names.fresh("k")
        with kb.sub_block() as body:
            value = kb.read(kb.pointer_element(ptr, n.Var(j, I32, loc=loc), c), c)
            body_of(let(dm.call("fabs", convert(value, rt)), "v"))
        kb.emit(n.For(j, I32, n.Const(0, I32), count, n.Const(1, I32), tuple(body), loc=loc))

    inf_name, inf_seen = var(n.Const(False, BOOL), "inf_seen")
    nan_name, nan_seen = var(n.Const(False, BOOL), "nan_seen")

    def flags(v: n.Expr) -> None:
        kb.emit(n.Assign(inf_name, dm.b("lor", inf_seen, dm.m.pred("isinf", v)), loc=loc))
        kb.emit(n.Assign(nan_name, dm.b("lor", nan_seen, dm.m.pred("isnan", v)), loc=loc))

    if rt != F64:
        total_name, total = var(dm.d(0.0), "total")

        def add_square(v: n.Expr) -> None:
            flags(v)
            w = let(dm.m.wide(v), "w")
            kb.emit(n.Assign(total_name, dm.fma(w, w, total), loc=loc))

        loop(add_square)
        root = dm.call("sqrt", total)
        value = dm.m.cast(dm.b("div", dm.d(1.0), root) if reciprocal else root, rt)
    else:
        big_name, big = var(dm.d(0.0), "big")

        def largest(v: n.Expr) -> None:
            flags(v)
            kb.emit(n.Assign(big_name, dm.call("fmax", big, v), loc=loc))

        loop(largest)
        _, e = dm.m.parts.frexp(big)
        e = let(e, "e")
        minus_e = dm.b("sub", n.Const(0, I32), e)
        hi_name, hi = var(dm.d(0.0), "sh")
        lo_name, lo = var(dm.d(0.0), "sl")

        def add_square(v: n.Expr) -> None:
            w = let(dm.m.parts.ldexp(v, minus_e), "w")
            p, pe = dm.two_prod(w, w)
            s, se = dm.two_sum(hi, p)
            kb.emit(n.Assign(lo_name, dm.add(lo, dm.add(se, pe)), loc=loc))
            kb.emit(n.Assign(hi_name, s, loc=loc))

        loop(add_square)
        value = dm.root_of_sum(let(hi, "sum_hi"), let(lo, "sum_lo"), e, reciprocal)
        value = dm.sel(dm.b("eq", big, dm.d(0.0)), dm.d(math.inf if reciprocal else 0.0), value)
    return dm.sel(inf_seen, dm.c(0.0 if reciprocal else math.inf, rt), dm.sel(nan_seen, dm.c(math.nan, rt), value))
