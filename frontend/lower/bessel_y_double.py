"""The double ``y0``, ``y1`` in device code, written in IR (``frontend.lower.bessel`` has the float
ones and the double ``j0``, ``j1``; ``frontend.lower.bessel_n`` builds ``yn`` on these).

CUDA documents 7 ulp below 8 and an absolute error of 5e-12 from there on. Below 8 the power series
(A&S 9.1.13, in ``q = x^2 / 4``) cancel near the zeros of ``Y_0``, ``Y_1``, so everything is in
double-double there:

- ``Y_0 = (2/pi) ((L + gamma) J_0 + q sum_k (-1)^k H_(k+1) q^k / ((k+1)!)^2)``,
  ``Y_1 = (2/pi) ((L + gamma) J_1 - 1/x - (x/4) sum_k (H_k + H_(k+1)) (-q)^k / (k! (k+1)!))``,
  ``L = log(x/2)``, ``H_k`` the harmonic numbers: the coefficients are exact rationals (two doubles
  each), Horner's rule in double-double (``Bessel.dd_horner``), ``q`` in double-double, ``1/x`` with
  its remainder from ``fma``, ``gamma``, ``2/pi`` and ``log 2`` as two doubles.
- ``L`` in double-double: ``x/2 = m 2^k`` with ``k = rint(log2(x/2))`` (the scaling by ``2^-k`` is
  exact), ``log m = 2 atanh(s)``, ``s = (m - 1)/(m + 1)`` (``|s| <= 0.172``) in double-double, the
  ``s^3`` term in double-double, the rest of the series (to ``s^27``) in double.
- within 0.02 of the zeros below 8 (three of ``Y_0``, two of ``Y_1``) the Taylor series about the
  zero (13 terms; ``x - zero`` with the zero as two doubles), as the double ``j0``, ``j1`` do;
- below ``2^-30``: ``(2/pi) (log x + gamma - log 2)`` and ``-(2/pi)/x`` (the other terms are below
  an ulp);
- from 16 on Hankel's expansion (``Bessel.large``, 14 terms of ``P`` and ``Q``).

``y(+-0) = -inf``, ``y(x < 0) = NaN``, ``y(+inf) = +0``, ``y(NaN) = NaN``. ``grad`` differentiates
this IR (the exponent ``k`` is an integer: piecewise constant).
"""
from __future__ import annotations

import math
from fractions import Fraction

from polypy.ir import nodes as n
from polypy.ir.types import F64, I64

from frontend.lower.bessel import DOUBLE_HANKEL_TERMS, DOUBLE_SERIES_END, Bessel

TERMS = 44  # H_k q^k / (k!)^2 below 1e-20 at q = 64
TINY = 2.0 ** -30
GAMMA_HI, GAMMA_LO = 0.5772156649015329, -4.942915152430645e-18  # Euler's constant as two doubles
LN2_HI, LN2_LO = 0.6931471805599453, 2.3190468138462996e-17
TWO_OVER_PI_HI, TWO_OVER_PI_LO = 0.6366197723675814, -3.935735335036497e-17
ATANH_TERMS = 13  # s^(2j+1) / (2j+1), j = 2 .. 14: below 1e-21 at |s| = 0.172
ZERO_WINDOW = 0.02
# The zeros of Y0, Y1 below 8 as two doubles and Y^(m)(zero) / m!, m = 1..13 (mpmath at 300 bits).
Y_ZEROS = {
    0: ((0.8935769662791675, 2.6596231539720385e-17,
         (0.8794208024971948, -0.49207893426297755, 0.22055282848167643, -0.22612171354416336, 0.2189484270103813,
          -0.20487719790614795, 0.1973356693290941, -0.19395009058736717, 0.1933761857036059,
          -0.19506492780964346, 0.19866677921832507, -0.20396193708295582, 0.21082123408542908)),
        (3.957678419314858, -1.0764340697562706e-16,
         (-0.40254267177502423, 0.05085590959215824, 0.058523822105170244, -0.006852566677111002,
          -0.0021835188740493565, 0.00019526940245097552, 5.0922913806511076e-05, -4.893369328096108e-06,
          -2.9348814581597406e-07, -2.1853417256735823e-08, 1.8928091126663436e-08, -3.6567238305937176e-09,
          7.669452749351834e-10)),
        (7.086051060301773, -8.835285723085408e-17,
         (0.3000976149104752, -0.02117523655676953, -0.048024070076259875, 0.0033183482688956315,
          0.002175984016443104, -0.0001406025977408225, -4.5951406706884365e-05, 2.701363792739061e-06,
          5.749349569687992e-07, -3.098470252366842e-08, -4.717221546843204e-09, 2.302945652482535e-10,
          2.8268572827710586e-11))),
    1: ((2.197141326031017, -4.8259835876454966e-17,
         (0.5207864124022675, -0.1185145457490966, -0.03285739740528641, -0.004797811670105437,
          0.0074225533327074685, -0.0025952416882642016, 0.0010668530000547797, -0.0005096013043558059,
          0.0002358699837551761, -0.000107760438150386, 4.924428615146201e-05, -2.2491132085320907e-05,
          1.0263851945656886e-05)),
        (5.429681040794135, 4.162514026670377e-16,
         (-0.3403180455234406, 0.031338677444086686, 0.050947939743420094, -0.0041601159343906905,
          -0.002165998751088117, 0.0001466208928934434, 4.645867906118146e-05, -2.863862537213281e-06,
          -5.46442065713147e-07, 2.5505144774230954e-08, 5.598034646974019e-09, -3.855618830613434e-10,
          2.2765620087465614e-12))),
}


def _harmonic(k: int) -> Fraction:
    return sum((Fraction(1, i) for i in range(1, k + 1)), Fraction(0))


Pair = tuple[n.Expr, n.Expr]


class BesselYDouble:
    """``Y_0``, ``Y_1`` of a double, on ``Bessel``'s builders."""

    def __init__(self, bessel: Bessel) -> None:
        self.bessel = bessel
        self.dm = bessel.dm
        self.m, self.d, self.b, self.call, self.sel, self.let = bessel.m, bessel.d, bessel.b, bessel.call, \
            bessel.sel, bessel.let

    # ---------------------------------------------------------------- double-double
    def _norm(self, hi: n.Expr, lo: n.Expr) -> Pair:
        s = self.let(self.dm.add(hi, lo), "dh")
        return s, self.let(self.dm.sub(lo, self.dm.sub(s, hi)), "dl")

    def dd_add(self, a: Pair, b: Pair) -> Pair:
        s, e = self.dm.two_sum(a[0], b[0])
        return self._norm(s, self.dm.add(e, self.dm.add(a[1], b[1])))

    def dd_mul(self, a: Pair, b: Pair) -> Pair:
        dm = self.dm
        p, e = dm.two_prod(a[0], b[0])
        return self._norm(p, dm.fma(a[0], b[1], dm.fma(a[1], b[0], e)))

    def const(self, hi: float, lo: float) -> Pair:
        return self.d(hi), self.d(lo)

    # ---------------------------------------------------------------- log(x/2) + gamma
    def log_half_plus_gamma(self, x: n.Expr) -> Pair:
        """``log(x/2) + gamma`` in double-double, ``x`` in [2^-31, 16]."""
        dm, m = self.dm, self.m
        half = self.let(dm.mul(x, self.d(0.5)), "hx")
        k = self.let(n.Cast(I64, self.call("rint", self.call("log2", half)), loc=half.loc), "lk")
        scaled = self.let(dm.mul(half, m.parts.power(self.b("sub", m.c(0, I64), k), F64)), "lm")  # exact
        num = self.let(dm.sub(scaled, self.d(1.0)), "ln")  # exact: scaled in [0.7, 1.42]
        den_h, den_l = dm.two_sum(scaled, self.d(1.0))
        sh = self.let(self.b("div", num, den_h), "sh")
        rest = dm.sub(dm.fma(m.neg(sh), den_h, num), dm.mul(sh, den_l))
        sl = self.let(self.b("div", rest, den_h), "sl")
        # 2 atanh(s) = 2s + (2/3) s^3 + sum_{j>=2} 2 s^(2j+1) / (2j+1); the s^3 term in double-double
        s2h, s2e = dm.two_prod(sh, sh)
        s3h, s3e = dm.two_prod(s2h, sh)
        s3e = self.let(dm.fma(s2e, sh, s3e), "s3e")
        third_h = 2.0 / 3.0
        third_l = float(Fraction(2, 3) - Fraction(third_h))
        th, te = dm.two_prod(s3h, self.d(third_h))
        te = dm.fma(s3h, self.d(third_l), dm.fma(s3e, self.d(third_h), te))
        s2 = self.let(s2h, "s2")
        tail = self.bessel.series(s2, [2.0 / (2 * j + 5) for j in range(ATANH_TERMS)])
        tail = dm.mul(dm.mul(tail, s3h), s2)  # s^5 (2/5 + 2/7 s^2 + ...)
        low = dm.add(dm.add(te, tail), dm.mul(dm.mul(sl, self.d(2.0)), dm.add(self.d(1.0), s2)))
        log_m = self._norm(*self.dm.two_sum(dm.mul(sh, self.d(2.0)), th))
        log_m = self._norm(log_m[0], dm.add(log_m[1], low))
        kf = self.let(m.cast(k, F64), "kf")
        kh, ke = dm.two_prod(kf, self.d(LN2_HI))
        k_ln2 = self._norm(kh, dm.fma(kf, self.d(LN2_LO), ke))
        return self.dd_add(self.dd_add(k_ln2, log_m), self.const(GAMMA_HI, GAMMA_LO))

    # ---------------------------------------------------------------- the series below 16
    def small(self, nu: int, x: n.Expr) -> n.Expr:
        """``Y_nu`` of ``x`` in [2^-31, 16] by the series in double-double, rounded once."""
        dm, bessel = self.dm, self.bessel
        qh, ql = dm.two_prod(x, x)
        qh, ql = self.let(dm.mul(qh, self.d(0.25)), "qh"), self.let(dm.mul(ql, self.d(0.25)), "ql")
        lg = self.log_half_plus_gamma(x)
        if nu == 0:
            j = bessel.dd_horner(qh, ql, [Fraction((-1) ** k, math.factorial(k) ** 2) for k in range(TERMS)])
            rest = bessel.dd_horner(qh, ql, [(-1) ** k * _harmonic(k + 1) / math.factorial(k + 1) ** 2
                                             for k in range(TERMS)])
            total = self.dd_add(self.dd_mul(lg, j), self.dd_mul((qh, ql), rest))
        else:
            quarter = self.let(dm.mul(x, self.d(0.25)), "xq")  # exact
            j = bessel.dd_horner(qh, ql, [Fraction((-1) ** k, math.factorial(k) * math.factorial(k + 1))
                                          for k in range(TERMS)])
            j = self.dd_mul(j, (dm.mul(x, self.d(0.5)), self.d(0.0)))
            rest = bessel.dd_horner(qh, ql, [(-1) ** k * (_harmonic(k) + _harmonic(k + 1)) /
                                             (math.factorial(k) * math.factorial(k + 1)) for k in range(TERMS)])
            rest = self.dd_mul(rest, (quarter, self.d(0.0)))
            inv = self.let(self.b("div", self.d(1.0), x), "inv")
            inv_l = self.b("div", self.m.neg(dm.fma(inv, x, self.d(-1.0))), x)
            total = self.dd_add(self.dd_mul(lg, j), (self.m.neg(inv), self.m.neg(inv_l)))
            total = self.dd_add(total, (self.m.neg(rest[0]), self.m.neg(rest[1])))
        hi, lo = total
        p, e = dm.two_prod(hi, self.d(TWO_OVER_PI_HI))
        return dm.add(p, dm.fma(hi, self.d(TWO_OVER_PI_LO), dm.fma(lo, self.d(TWO_OVER_PI_HI), e)))

    # ---------------------------------------------------------------- entry
    def value(self, fn: str, x: n.Expr) -> n.Expr:
        dm, m = self.dm, self.m
        nu = 1 if fn == "y1" else 0
        x = self.let(x, "x")
        near = self.let(self.call("fmin", self.call("fmax", x, self.d(TINY / 2)), self.d(DOUBLE_SERIES_END)), "near")
        value = self.small(nu, near)
        for zh, zl, taylor in Y_ZEROS[nu]:
            t = self.let(dm.sub(dm.sub(x, self.d(zh)), self.d(zl)), "t")  # x - zh exact there
            poly = self.bessel.series(t, list(taylor))
            value = self.sel(self.b("lt", self.call("fabs", t), self.d(ZERO_WINDOW)), dm.mul(t, poly), value)
        tiny_x = self.let(self.call("fmax", x, self.d(0.0)), "tx")  # (NaN, negatives: replaced below)
        if nu == 0:
            tiny = dm.mul(self.d(TWO_OVER_PI_HI), dm.add(self.call("log", tiny_x), self.d(GAMMA_HI - LN2_HI)))
        else:
            tiny = self.b("div", self.d(-TWO_OVER_PI_HI), tiny_x)
        value = self.sel(self.b("lt", x, self.d(TINY)), tiny, value)
        finite = m.pred("isfinite", x)
        far = self.let(self.sel(finite, self.call("fmax", x, self.d(DOUBLE_SERIES_END)),
                                self.d(DOUBLE_SERIES_END)), "far")
        large = self.bessel.large(fn, far, DOUBLE_HANKEL_TERMS)
        value = self.sel(self.b("lt", x, self.d(DOUBLE_SERIES_END)), value, large)
        value = self.sel(m.pred("isinf", x), self.d(0.0), value)
        value = self.sel(self.b("eq", x, self.d(0.0)), self.d(-math.inf), value)
        value = self.sel(self.b("lt", x, self.d(0.0)), self.d(math.nan), value)
        return self.sel(m.pred("isnan", x), x, value)
