"""``jn(n, x)``, ``yn(n, x)`` and their float versions ``jnf``, ``ynf`` in device code: loops over the
order in double (``frontend.lower.bessel`` gives the orders 0 and 1: for float ``x`` in double, rounded
once to float at the end; for double ``x`` the double ``j0``/``j1`` and ``bessel_y_double``'s ``y0``/``y1``).

- ``yn``: the forward recurrence ``Y_(k+1) = (2k/x) Y_k - Y_(k-1)`` from ``Y_0``, ``Y_1`` (stable:
  ``Y_k`` grows with ``k``), an infinity kept once reached.
- ``jn``: the forward recurrence from ``J_0``, ``J_1`` where ``|x| >= n`` (stable there); below,
  Miller's backward recurrence from ``m = n + 30 + 2 floor(sqrt(50 n))`` (``J_(m+1) = 0``,
  ``J_m = 2^-100``) down to ``J_0``, rescaled by ``2^-600`` whenever a value passes ``2^600``, and
  normalized by ``J_0 + 2 (J_2 + J_4 + ...) = 1``; below ``|x| = 2^-300`` (doubles only: ``2k/x``
  would overflow) the leading term ``(x/2)^n / n!``, zero past ``n = 3``. ``J_n(-x) = (-1)^n J_n(x)``.
- As CUDA documents: NaN for ``n < 0`` and for NaN ``x``; ``jn(n, +-inf) = +-0`` (odd ``n``: the
  sign of ``x``, as ``j1``), ``yn(n, +inf) = +0``, ``yn(n, 0) = -inf``, ``yn`` of a negative ``x`` NaN.
"""
from __future__ import annotations

import math

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import BOOL, F32, F64, I32

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.lower.bessel import Bessel
from frontend.lower.bessel_y_double import BesselYDouble
from frontend.lower.double_math import DoubleMath
from frontend.lower.more_math import MoreMath

BESSEL_N = ("jn", "jnf", "yn", "ynf")
TINY = 2.0 ** -300


def bessel_n(kb, name: str, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
    loc = kb.loc(c)
    rt = tm.scalar_type(fn.result_type)
    what = name.rstrip("f")
    if rt not in (F32, F64):
        raise kb.error(f"'{name}' with a {fn.result_type.spelling} result is not supported", c)

    let = kb.binder(c)

    def var(init: n.Expr, base: str) -> tuple[str, n.Expr]:
        v = kb.temp(init.type, init, base, c)
        return v.name, n.Var(v.name, v.type, loc=loc)

    dm = DoubleMath(MoreMath(let, loc))
    b, d, sel = dm.b, dm.d, dm.sel
    order = let(convert(kb.scalar(args[0]), I32), "order")
    x = let(dm.m.cast(convert(kb.scalar(args[1]), rt), F64), "x")
    ax = let(dm.call("fabs", x), "ax")
    bessel = Bessel(dm)
    kind = "j" if what == "jn" else "y"
    if rt == F32:  # in double, rounded once at the end
        first = let(bessel.bessel_jy_double(kind + "0", ax), "b0")
        second = let(bessel.bessel_jy_double(kind + "1", ax), "b1")
    elif kind == "j":
        first = let(bessel.bessel_j_double("j0", ax), "b0")
        second = let(bessel.bessel_j_double("j1", ax), "b1")
    else:
        ys = BesselYDouble(bessel)
        first, second = let(ys.value("y0", ax), "b0"), let(ys.value("y1", ax), "b1")
    orders = let(dm.call("max", order, n.Const(1, I32)), "orders")  # >= 1 below; 0 selected at the end
    ordf = let(dm.m.cast(orders, F64), "ordf")
    safe_x = let(sel(b("lor", b("eq", ax, d(0.0)), dm.m.pred("isinf", ax)), d(1.0), ax), "sx")

    def loop(count: n.Expr, body_of) -> None:
        j = kb.names.fresh("k")
        with kb.sub_block() as body:
            body_of(n.Var(j, I32, loc=loc))
        kb.emit(n.For(j, I32, n.Const(0, I32), count, n.Const(1, I32), tuple(body), loc=loc))

    prev_name, prev = var(first, "prev")
    cur_name, cur = var(second, "cur")
    forward = let(b("ge", ax, ordf), "forward") if kind == "j" else n.Const(True, BOOL)

    def step_up(k: n.Expr) -> None:  # from order k + 1 to k + 2
        kk = dm.m.cast(b("add", k, n.Const(1, I32)), F64)
        nxt = let(dm.sub(dm.mul(b("div", dm.mul(kk, d(2.0)), safe_x), cur), prev), "nxt")
        nxt = sel(dm.m.pred("isinf", cur), cur, nxt)
        kb.emit(n.Assign(prev_name, cur, loc=loc))
        kb.emit(n.Assign(cur_name, nxt, loc=loc))

    loop(sel(forward, b("sub", orders, n.Const(1, I32)), n.Const(0, I32)), step_up)
    value = cur
    if kind == "j":
        start = let(dm.m.cast(b("add", b("add", ordf, d(30.0)),
                                   dm.mul(d(2.0), dm.call("floor", dm.call("sqrt", dm.mul(ordf, d(50.0)))))), I32),
                    "m")
        hi_name, hi = var(d(0.0), "jhi")          # J_(k+1)
        lo_name, lo = var(d(2.0 ** -100), "jlo")  # J_k
        sum_name, total = var(d(0.0), "norm")
        keep_name, keep = var(d(0.0), "jn")

        def step_down(t: n.Expr) -> None:  # from order k = m - t to k - 1
            k = let(b("sub", start, t), "kk")
            below = let(dm.sub(dm.mul(b("div", dm.mul(dm.m.cast(k, F64), d(2.0)), safe_x), lo), hi), "below")
            index = b("sub", k, n.Const(1, I32))
            even = b("land", b("eq", b("band", index, n.Const(1, I32)), n.Const(0, I32)),
                     b("ge", index, n.Const(2, I32)))
            new_total = let(dm.add(total, sel(even, dm.mul(below, d(2.0)), d(0.0))), "tot")
            new_keep = let(sel(b("eq", index, orders), below, keep), "keep")
            scale = let(sel(b("gt", dm.call("fabs", below), d(2.0 ** 600)), d(2.0 ** -600), d(1.0)), "scale")
            kb.emit(n.Assign(hi_name, dm.mul(lo, scale), loc=loc))
            kb.emit(n.Assign(lo_name, dm.mul(below, scale), loc=loc))
            kb.emit(n.Assign(sum_name, dm.mul(new_total, scale), loc=loc))
            kb.emit(n.Assign(keep_name, dm.mul(new_keep, scale), loc=loc))

        loop(sel(forward, n.Const(0, I32), start), step_down)
        miller = b("div", keep, dm.add(total, lo))  # lo is J_0 now
        value = sel(forward, cur, miller)
        # Below 2^-300 (doubles only) the recurrence's 2k/x would overflow: (x/2)^n / n!, nonzero
        # only for n <= 3 there (the terms in q = x^2/4 are far below an ulp).
        h = let(dm.mul(ax, d(0.5)), "h")
        h2 = let(dm.mul(h, h), "h2")
        leading = sel(b("eq", order, n.Const(1, I32)), h,
                      sel(b("eq", order, n.Const(2, I32)), dm.mul(h2, d(0.5)),
                          sel(b("eq", order, n.Const(3, I32)), b("div", dm.mul(h2, h), d(6.0)), d(0.0))))
        value = sel(b("lt", ax, d(TINY)), leading, value)
        value = sel(b("eq", order, n.Const(0, I32)), first, value)
        odd = b("ne", b("band", order, n.Const(1, I32)), n.Const(0, I32))
        value = sel(b("eq", ax, d(0.0)), sel(b("eq", order, n.Const(0, I32)), d(1.0), d(0.0)), value)
        value = sel(dm.m.pred("isinf", ax), d(0.0), value)
        value = sel(b("land", odd, dm.m.pred("signbit", x)), dm.m.neg(value), value)  # odd: jn(n, -0) = -0
    else:
        value = sel(b("eq", order, n.Const(0, I32)), first, value)
        value = sel(b("eq", x, d(0.0)), d(-math.inf), value)
        value = sel(b("lt", x, d(0.0)), d(math.nan), value)
        value = sel(b("eq", x, d(math.inf)), d(0.0), value)
    value = sel(b("lor", b("lt", order, n.Const(0, I32)), dm.m.pred("isnan", x)), d(math.nan), value)
    return dm.m.cast(value, rt)
