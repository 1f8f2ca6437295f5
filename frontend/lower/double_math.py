"""The double versions of CUDA's ``sinpi``, ``cospi``, ``rcbrt``, ``rhypot``, ``norm3d``/``norm4d``
and their reciprocals, ``normcdf``, ``erfcx``, ``erfinv``, ``erfcinv`` and ``normcdfinv``, written in
IR from the IR's operations (``frontend.lower.more_math`` has the float ones, computed in double).

A double result cannot be computed in a wider type and rounded once: each function reduces its
argument exactly and carries the one rounding that matters in a second double (a double-double,
its low part from ``fma``), then corrects the IR's double function (``sin``, ``cbrt``, ``erfc``...,
each within about an ulp on every backend) to first order:

- ``sinpi``/``cospi``: ``t = fmod(x, 2)`` (exact), ``k = rint(2t)``, ``r = t - k/2`` (exact,
  ``|r| <= 1/4``), ``sin(pi r)`` and ``cos(pi r)`` by their Taylor series to ``r^19`` with the
  leading terms ``pi r`` and ``(pi r)^2 / 2`` in double-double (``pi`` as two doubles, the
  products' errors by ``fma``), so the sum rounds once; chosen and signed by ``k mod 4``; a zero
  ``sinpi`` has ``x``'s sign, a zero ``cospi`` is ``+0``; infinities give NaN.
- ``rcbrt``: ``|x| = m 2^(3q)`` with ``m`` in [1/2, 4) (exact), ``y = 1 / cbrt(m)``, one Newton
  step ``y + y (1 - m y^3) / 3`` with ``m y^3`` in double-double, times ``2^-q``; ``+-0`` give
  ``+-inf``, ``+-inf`` give ``+-0``.
- ``rhypot``, ``norm3d``, ``rnorm3d``, ``norm4d``, ``rnorm4d`` (float and double): the arguments
  scaled by the power of two of the largest (exact but for parts below ``2^-1074`` of it), the sum
  of the squares in double-double, its square root (or reciprocal square root) corrected by one
  Newton step in double-double, scaled back; ``+inf`` (``+0``) when an argument is infinite,
  even with a NaN, NaN when one is NaN, ``+0`` (``+inf``) when all are zero.
- ``normcdf``: ``erfc(z) / 2``, ``z = -x / sqrt 2 = z + z'`` in double-double, ``erfc(z + z') =
  erfc(z) - 2/sqrt(pi) exp(-z^2) z'``.
- ``erfcx``: ``exp(x^2) erfc(x)`` with ``x^2 = h + h'`` (``exp(h) erfc(x) (1 + h')``, the product in
  double-double, rounded once) below 26; from 26 on
  (``erfc`` nears double's underflow) the asymptotic series ``sum (2k-1)!! / (-2x^2)^k``, k <= 8,
  over ``x sqrt pi`` (truncation below 2e-19 relative).
- ``erfinv``, ``erfcinv``, ``normcdfinv``: the float algorithm (Winitzki's start, four Newton
  steps on ``erf(y) = e`` where ``e <= 1/2``, else on ``erfc(y) = c``) in double, where ``c`` below
  ``2^-1000`` solves ``log erfc(y) = -y^2 + log erfcx(y) = log c`` instead (``erfc`` is subnormal
  there), ``y^2`` in double-double and ``erfcx`` by the series above.
"""
from __future__ import annotations

import math

from polypy.ir import nodes as n
from polypy.ir.types import F64, I32, ScalarType

PI_HI = math.pi
PI_LO = 1.2246467991473532e-16  # pi - PI_HI
RSQRT2_HI = 0.7071067811865476
RSQRT2_LO = -4.833646656726457e-17  # 1/sqrt(2) - RSQRT2_HI


class DoubleMath:
    """The IR of the functions above on top of ``MoreMath``'s builders (``m``)."""

    def __init__(self, m) -> None:
        self.m = m
        self.c, self.b, self.call, self.sel, self.let = m.c, m.b, m.call, m.sel, m.let

    def d(self, v: float) -> n.Expr:
        return self.c(v, F64)

    def add(self, x: n.Expr, y: n.Expr) -> n.Expr:
        return self.b("add", x, y)

    def sub(self, x: n.Expr, y: n.Expr) -> n.Expr:
        return self.b("sub", x, y)

    def mul(self, x: n.Expr, y: n.Expr) -> n.Expr:
        return self.b("mul", x, y)

    def fma(self, x: n.Expr, y: n.Expr, z: n.Expr) -> n.Expr:
        return self.call("fma", x, y, z)

    def two_prod(self, x: n.Expr, y: n.Expr) -> tuple[n.Expr, n.Expr]:
        p = self.let(self.mul(x, y), "p")
        return p, self.let(self.fma(x, y, self.m.neg(p)), "pe")

    def two_sum(self, x: n.Expr, y: n.Expr) -> tuple[n.Expr, n.Expr]:
        s = self.let(self.add(x, y), "s")
        v = self.let(self.sub(s, x), "v")
        e = self.add(self.sub(x, self.sub(s, v)), self.sub(y, v))
        return s, self.let(e, "se")

    # ---------------------------------------------------------------- sinpi, cospi
    def sin_cos_pi(self, x: n.Expr) -> tuple[n.Expr, n.Expr]:
        x = self.let(x, "x")
        t = self.let(self.call("fmod", x, self.d(2.0)), "t")
        k = self.let(self.call("rint", self.mul(t, self.d(2.0))), "k")
        r = self.let(self.sub(t, self.mul(k, self.d(0.5))), "r")
        # sin(pi r) = pi r + r^3 Q(r^2), cos(pi r) = 1 - (pi r)^2 / 2 + r^4 R(r^2): Taylor series
        # (|pi r| <= pi/4: the next terms are below 1e-17 relative), pi r and (pi r)^2 / 2 in
        # double-double, so that the sum rounds once.
        p, pe = self.two_prod(r, self.d(PI_HI))
        pl = self.let(self.fma(r, self.d(PI_LO), pe), "pl")
        r2 = self.let(self.mul(r, r), "r2")
        series = self.d(0.0)
        for j in range(9, 0, -1):
            series = self.fma(series, r2, self.d((-1) ** j * math.pi ** (2 * j + 1) / math.factorial(2 * j + 1)))
        s = self.let(self.add(p, self.fma(self.mul(r, r2), series, pl)), "sp")
        hh, he = self.two_prod(p, p)
        h_hi = self.let(self.mul(hh, self.d(0.5)), "hh")
        h_lo = self.fma(p, pl, self.mul(he, self.d(0.5)))
        series = self.d(0.0)
        for j in range(9, 1, -1):
            series = self.fma(series, r2, self.d((-1) ** j * math.pi ** (2 * j) / math.factorial(2 * j)))
        t = self.let(self.sub(self.d(1.0), h_hi), "t")
        err = self.sub(self.sub(self.d(1.0), t), h_hi)  # exact: h_hi <= 1
        co = self.let(self.add(t, self.sub(self.fma(self.mul(r2, r2), series, err), h_lo)), "cp")
        q = self.let(self.sub(k, self.mul(self.call("floor", self.mul(k, self.d(0.25))), self.d(4.0))), "q")

        def quadrant(values: tuple[n.Expr, n.Expr, n.Expr, n.Expr]) -> n.Expr:
            return self.sel(self.b("eq", q, self.d(0.0)), values[0],
                            self.sel(self.b("eq", q, self.d(1.0)), values[1],
                                     self.sel(self.b("eq", q, self.d(2.0)), values[2], values[3])))

        neg = self.m.neg
        sin_v = self.let(quadrant((s, co, neg(s), neg(co))), "sinpi")
        cos_v = self.let(quadrant((co, neg(s), neg(co), s)), "cospi")
        zero = self.d(0.0)
        sin_v = self.sel(self.b("eq", sin_v, zero), self.call("copysign", zero, x), sin_v)
        cos_v = self.sel(self.b("eq", cos_v, zero), zero, cos_v)
        return sin_v, cos_v

    # ---------------------------------------------------------------- rcbrt
    def rcbrt(self, x: n.Expr) -> n.Expr:
        x = self.let(x, "x")
        ax = self.let(self.call("fabs", x), "ax")
        f, e = self.m.parts.frexp(ax)
        f = self.let(f, "f")
        ef = self.let(self.m.cast(e, F64), "e")
        q = self.let(self.call("floor", self.b("div", ef, self.d(3.0))), "q")
        rem = self.sub(ef, self.mul(q, self.d(3.0)))  # 0, 1 or 2
        mm = self.let(self.mul(f, self.sel(self.b("eq", rem, self.d(0.0)), self.d(1.0),
                                           self.sel(self.b("eq", rem, self.d(1.0)), self.d(2.0), self.d(4.0)))), "mm")
        y = self.let(self.b("div", self.d(1.0), self.call("cbrt", mm)), "y")
        y2, y2e = self.two_prod(y, y)
        y3, y3e = self.two_prod(y2, y)
        y3lo = self.fma(y2e, y, y3e)
        p, pe = self.two_prod(mm, y3)
        plo = self.fma(mm, y3lo, pe)
        err = self.sub(self.sub(self.d(1.0), p), plo)
        y = self.fma(y, self.mul(err, self.d(1.0 / 3.0)), y)
        value = self.m.parts.ldexp(self.let(y, "y"), self.m.cast(self.m.neg(q), I32))
        value = self.call("copysign", value, x)
        zero = self.b("eq", x, self.d(0.0))
        value = self.sel(zero, self.call("copysign", self.d(math.inf), x), value)
        value = self.sel(self.m.pred("isinf", x), self.call("copysign", self.d(0.0), x), value)
        return self.sel(self.m.pred("isnan", x), x, value)

    # ---------------------------------------------------------------- norms
    def norm(self, xs: list[n.Expr], reciprocal: bool) -> n.Expr:
        """sqrt(sum xs^2) or its reciprocal, in the arguments' precision."""
        ty: ScalarType = xs[0].type
        if ty != F64:  # float: the squares exact in double, the sum within a double ulp, one rounding
            ds = [self.let(self.m.wide(v), "v") for v in xs]
            total = self.mul(ds[0], ds[0])
            for v in ds[1:]:
                total = self.add(total, self.mul(v, v))
            root = self.call("sqrt", total)
            value = self.b("div", self.d(1.0), root) if reciprocal else root
            return self.m.cast(self.special_norm([self.let(v, "v") for v in xs], self.m.cast(value, ty), reciprocal),
                               ty)
        xs = [self.let(self.call("fabs", v), "v") for v in xs]
        big = xs[0]
        for v in xs[1:]:
            big = self.call("fmax", big, v)
        _, e = self.m.parts.frexp(self.let(big, "big"))
        e = self.let(e, "e")
        minus_e = self.b("sub", self.c(0, I32), e)
        scaled = [self.let(self.m.parts.ldexp(v, minus_e), "w") for v in xs]
        hi, lo = self.two_prod(scaled[0], scaled[0])
        for v in scaled[1:]:
            p, pe = self.two_prod(v, v)
            hi, se = self.two_sum(hi, p)
            lo = self.let(self.add(lo, self.add(se, pe)), "lo")
        value = self.root_of_sum(self.let(hi, "sh"), self.let(lo, "sl"), e, reciprocal)
        zero = self.b("eq", big, self.d(0.0))
        value = self.sel(zero, self.d(math.inf if reciprocal else 0.0), value)
        return self.special_norm(xs, value, reciprocal)

    def root_of_sum(self, hi: n.Expr, lo: n.Expr, e: n.Expr, reciprocal: bool) -> n.Expr:
        """``sqrt(hi + lo) 2^e`` (or its reciprocal ``2^-e / sqrt(hi + lo)``) rounded nearly once,
        ``hi + lo`` a double-double in [1/4, n] (the scaled sum of squares)."""
        minus_e = self.b("sub", self.c(0, I32), e)
        root = self.let(self.call("sqrt", hi), "root")
        if not reciprocal:
            # sqrt(h + l) = s + (h - s^2 + l) / (2 s)
            resid = self.add(self.fma(self.m.neg(root), root, hi), lo)
            value = self.fma(resid, self.b("div", self.d(0.5), root), root)
            value = self.m.parts.ldexp(self.let(value, "nv"), e)
        else:
            r = self.let(self.b("div", self.d(1.0), root), "r")
            r2, r2e = self.two_prod(r, r)
            p, pe = self.two_prod(hi, r2)
            plo = self.add(pe, self.fma(hi, r2e, self.mul(lo, r2)))
            err = self.sub(self.sub(self.d(1.0), p), plo)
            value = self.fma(r, self.mul(err, self.d(0.5)), r)
            value = self.m.parts.ldexp(self.let(value, "nv"), minus_e)
        return value

    def special_norm(self, xs: list[n.Expr], value: n.Expr, reciprocal: bool) -> n.Expr:
        ty = value.type
        inf = self.m.pred("isinf", xs[0])
        nan = self.m.pred("isnan", xs[0])
        for v in xs[1:]:
            inf = self.b("lor", inf, self.m.pred("isinf", v))
            nan = self.b("lor", nan, self.m.pred("isnan", v))
        return self.sel(inf, self.c(0.0 if reciprocal else math.inf, ty),
                        self.sel(nan, self.c(math.nan, ty), value))

    # ---------------------------------------------------------------- normcdf, erfcx
    def normcdf(self, x: n.Expr) -> n.Expr:
        x = self.let(x, "x")
        zh, ze = self.two_prod(x, self.d(-RSQRT2_HI))
        zl = self.fma(x, self.d(-RSQRT2_LO), ze)
        zl = self.let(self.sel(self.m.pred("isfinite", zl), zl, self.d(0.0)), "zl")
        base = self.let(self.call("erfc", zh), "erfc")
        slope = self.mul(self.d(2.0 / math.sqrt(math.pi)), self.call("exp", self.m.neg(self.mul(zh, zh))))
        value = self.fma(self.m.neg(slope), zl, base)
        return self.sel(self.m.pred("isnan", x), x, self.mul(value, self.d(0.5)))

    def erfcx_series(self, x: n.Expr) -> n.Expr:
        """The asymptotic series of erfcx for ``x >= 26`` (``x`` clamped there by the caller)."""
        t = self.let(self.b("div", self.d(-0.5), self.mul(x, x)), "t")  # -1/(2x^2); 0 past 1e154
        series = self.d(0.0)
        for k in range(8, -1, -1):
            series = self.fma(series, t, self.d(float(math.prod(range(1, 2 * k, 2)))))
        return self.b("div", self.mul(series, self.d(1.0 / math.sqrt(math.pi))), x)

    def erfcx(self, x: n.Expr) -> n.Expr:
        x = self.let(x, "x")
        xc = self.let(self.call("fmin", self.call("fmax", x, self.d(-27.0)), self.d(26.0)), "xc")  # exp(729) = inf
        h, he = self.two_prod(xc, xc)
        # exp(h + h') erfc(x) = p + (p' + p h'), p + p' = exp(h) erfc(x) exactly: one rounding
        # besides the two functions'
        p, pe = self.two_prod(self.let(self.call("exp", h), "eh"), self.let(self.call("erfc", xc), "ec"))
        direct = self.sel(self.m.pred("isinf", p), p, self.add(p, self.fma(p, he, pe)))  # exp(729): +inf
        big = self.let(self.call("fmax", x, self.d(26.0)), "big")
        value = self.sel(self.b("ge", x, self.d(26.0)), self.erfcx_series(big), direct)
        return self.sel(self.m.pred("isnan", x), x, value)

    # ---------------------------------------------------------------- inverse error functions
    def log_erfcinv(self, y: n.Expr, c: n.Expr) -> n.Expr:
        """Newton on ``log erfc(y) = log c`` from ``y`` (``c`` below 1e-10: ``erfc`` is nearly
        exponential in ``y^2`` there, which Newton on ``erfc(y) = c`` follows only slowly).
        ``log erfc(y)`` is ``log(erfc(y))`` below 26, ``-y^2 + log erfcx(y)`` (``y^2`` in
        double-double, ``erfcx`` by its series) from 26 on, where ``erfc`` is subnormal."""
        log_c = self.let(self.call("log", self.call("fmax", c, self.d(5e-324))), "logc")
        for _ in range(4):
            y = self.let(self.call("fmax", y, self.d(1.0)), "yc")
            far = self.let(self.b("ge", y, self.d(26.0)), "far")
            series = self.let(self.erfcx_series(self.call("fmax", y, self.d(26.0))), "a")
            near = self.call("fmin", y, self.d(26.0))
            tail = self.let(self.call("erfc", near), "tail")
            h, he = self.two_prod(y, y)
            log_far = self.add(self.sub(self.m.neg(h), he), self.call("log", series))
            g = self.sub(self.sel(far, log_far, self.call("log", tail)), log_c)
            scale = self.sel(far, series, self.mul(tail, self.call("exp", self.mul(near, near))))  # erfcx(y)
            # d/dy log erfc(y) = -2 / (sqrt(pi) erfcx(y))
            y = self.let(self.fma(g, self.mul(scale, self.d(math.sqrt(math.pi) / 2)), y), "y")
        return y
