"""``lgamma`` and ``tgamma`` in double, written in IR (``frontend.lower.double_math``'s builders).

For ``w > 0`` (exact reductions only; series coefficients from the zeta function, a fact):

- ``w < 1/2``: ``Gamma(w) = Gamma(1 + w) / w`` and ``lgamma(w) = Z1(w) - log w``.
- ``1/2 <= w < 3/2``: ``lgamma(w) = Z1(w - 1)`` (``w - 1`` exact), with ``Z1(z) = lgamma(1 + z)
  = -gamma z + sum_{k>=2} (-1)^k zeta(k)/k z^k`` to ``k = 57`` (``|z| <= 1/2``: truncation below
  1e-19).
- ``3/2 <= w < 10``: ``m = floor(w - 3/2)`` (0..8), ``lgamma(w) = Z2(w - m - 2) + log((w-1) ...
  (w-m))`` (each factor exact, their product in double-double), with ``Z2(z) = lgamma(2 + z) =
  (1 - gamma) z + sum_{k>=2} (-1)^k (zeta(k) - 1)/k z^k`` to ``k = 43``; ``Gamma(w) = exp(Z2)``
  times the product.
- ``w >= 10``: Stirling's series ``(w - 1/2) log w - w + log(2 pi)/2 + sum B2k / (2k (2k-1) w^(2k-1))``
  to ``w^-15``; ``Gamma(w) = t (e^-w t) sqrt(2 pi) exp(series)``, ``t = w^((w - 1/2)/2)`` (``pow``),
  so that no factor overflows before the result does (``+inf`` from ``w > 171.7``).

For ``x < 0`` the reflection ``Gamma(x) Gamma(-x) = -pi / (x sinpi(x))`` (``-x`` exact, ``sinpi``
reduced exactly): ``lgamma(x) = log(pi / |x sinpi x|) - lgamma(-x)``, below ``|x| = 1/2``
``log pi - log|sinpi x| - Z1(-x)`` (the logs of ``|x|`` cancel exactly), below ``2^-54`` ``-log|x|``;
``Gamma(x) = -pi / (x sinpi(x)) / Gamma(-x)`` (``Gamma(-x)`` divided out factor by factor), below
``2^-54`` ``1/x - gamma``. ``lgamma`` is ``+inf`` at the
poles (zero and the negative integers) and at the infinities, ``+0`` at 1 and 2; ``tgamma(+-0)``
is ``+-inf``, NaN at the negative integers and ``-inf``.
"""
from __future__ import annotations

import math

from polypy.ir import nodes as n
from polypy.ir.types import F64

EULER = (0.5772156649015329, -4.942915152430645e-18)
ONE_MINUS_EULER = (0.42278433509846713, 4.942915152430645e-18)
# (-1)^k zeta(k) / k, k = 2 .. 57
ZETA1 = (
    0.8224670334241132, -0.40068563438653143, 0.27058080842778454, -0.20738555102867398, 0.1695571769974082,
    -0.1440498967688461, 0.12550966952474304, -0.11133426586956469, 0.1000994575127818, -0.09095401714582904,
    0.083353840546109, -0.0769325164113522, 0.07143294629536133, -0.06666870588242046, 0.06250095514121304,
    -0.058823978658684585, 0.055555767627403614, -0.05263167937961666, 0.05000004769810169,
    -0.047619070330142226, 0.04545455629320467, -0.04347826605304026, 0.04166666915034121, -0.04000000119214014,
    0.03846153903467518, -0.037037037312989324, 0.035714285847333355, -0.034482758684919304, 0.03333333336437758,
    -0.03225806453115042, 0.03125000000727597, -0.030303030306558044, 0.029411764707594344,
    -0.02857142857226011, 0.027777777778181998, -0.027027027027223673, 0.02631578947377995,
    -0.025641025641072283, 0.025000000000022737, -0.024390243902450117, 0.023809523809529224,
    -0.023255813953491015, 0.02272727272727402, -0.022222222222222855, 0.021739130434782917,
    -0.021276595744681003, 0.02083333333333341, -0.02040816326530616, 0.020000000000000018,
    -0.019607843137254912, 0.019230769230769235, -0.01886792452830189, 0.01851851851851852,
    -0.01818181818181818, 0.017857142857142856, -0.017543859649122806)
# (-1)^k (zeta(k) - 1) / k, k = 2 .. 43
ZETA2 = (
    0.3224670334241132, -0.0673523010531981, 0.020580808427784546, -0.007385551028673986, 0.0028905103307415234,
    -0.001192753911703261, 0.0005096695247430425, -0.00022315475845357939, 9.945751278180853e-05,
    -4.492623673813314e-05, 2.050721277567069e-05, -9.439488275268397e-06, 4.374866789907488e-06,
    -2.039215753801366e-06, 9.55141213040742e-07, -4.492469198764566e-07, 2.1207184805554665e-07,
    -1.0043224823968099e-07, 4.7698101693639804e-08, -2.2711094608943164e-08, 1.0838659214896955e-08,
    -5.183475041970047e-09, 2.4836745438024785e-09, -1.1921401405860912e-09, 5.731367241678862e-10,
    -2.7595228851242334e-10, 1.330476437424449e-10, -6.4229645638381e-11, 3.1044247747322276e-11,
    -1.5021384080754142e-11, 7.275974480239079e-12, -3.527742476575915e-12, 1.711991790559618e-12,
    -8.315385841420285e-13, 4.04220052528944e-13, -1.9664756310966165e-13, 9.573630387838556e-14,
    -4.6640760264283744e-14, 2.2737369600659724e-14, -1.1091399470834522e-14, 5.413659156725363e-15,
    -2.643880017860995e-15)
BELOW_TEN = math.nextafter(10.0, 0.0)
# Bernoulli numbers B2k / (2k (2k - 1)), k = 8 .. 1
STIRLING = ((-3617.0, 122400.0), (1.0, 156.0), (-691.0, 360360.0), (1.0, 1188.0), (-1.0, 1680.0), (1.0, 1260.0),
            (-1.0, 360.0), (1.0, 12.0))


class GammaDouble:
    def __init__(self, dm) -> None:
        self.dm = dm
        self.m = dm.m
        self.d, self.b, self.call, self.sel, self.let = dm.d, dm.b, dm.call, dm.sel, dm.let

    def zeta_series(self, z: n.Expr, lead: tuple[float, float], coefficients: tuple[float, ...]) -> n.Expr:
        """lead z + sum c_k z^k (k >= 2), the first two terms and their sum in double-double (they
        nearly cancel where lgamma nears its minimum)."""
        dm = self.dm
        z = self.let(z, "z")
        tail = self.d(0.0)
        for c in reversed(coefficients[1:]):
            tail = dm.fma(tail, z, self.d(c))
        p1, p1e = dm.two_prod(self.d(lead[0]), z)
        zz, zze = dm.two_prod(z, z)
        p2, p2e = dm.two_prod(self.d(coefficients[0]), zz)
        total, te = dm.two_sum(p1, p2)
        low = dm.add(dm.add(te, dm.fma(self.d(lead[1]), z, p1e)), dm.fma(self.d(coefficients[0]), zze, p2e))
        return dm.add(total, dm.fma(dm.mul(zz, z), tail, low))

    def stirling_series(self, w: n.Expr) -> n.Expr:
        inv = self.let(self.b("div", self.d(1.0), w), "inv")
        inv2 = self.dm.mul(inv, inv)
        series = self.d(0.0)
        for num, den in STIRLING:
            series = self.dm.fma(series, inv2, self.d(num / den))
        return self.dm.mul(series, inv)

    def shifted(self, w: n.Expr) -> tuple[n.Expr, n.Expr, n.Expr, n.Expr]:
        """For ``w`` clamped to [3/2, 10): (z, the product (hi, lo), m)."""
        dm = self.dm
        m = self.let(self.call("floor", dm.sub(w, self.d(1.5))), "m")
        z = self.let(dm.sub(dm.sub(w, m), self.d(2.0)), "z")
        hi, lo = self.d(1.0), self.d(0.0)
        for i in range(1, 9):
            factor = self.let(self.sel(self.b("le", self.d(float(i)), m), dm.sub(w, self.d(float(i))), self.d(1.0)),
                              "f")
            p, pe = dm.two_prod(hi, factor)
            lo = self.let(dm.fma(lo, factor, pe), "plo")
            hi = p
        return z, hi, lo, m

    def lgamma_positive(self, w: n.Expr) -> n.Expr:
        """lgamma of a finite double ``w > 0``."""
        dm = self.dm
        w = self.let(w, "w")
        small = self.let(self.b("lt", w, self.d(0.5)), "small")
        near1 = self.let(self.b("lt", w, self.d(1.5)), "near1")
        mid = self.let(self.b("lt", w, self.d(10.0)), "mid")
        # One Z1 series: at w (below 1/2) or w - 1.
        z1 = self.let(self.sel(small, w, dm.sub(w, self.d(1.0))), "z1")
        s1 = self.let(self.zeta_series(z1, (-EULER[0], -EULER[1]), ZETA1), "s1")
        wc = self.let(self.call("fmin", self.call("fmax", w, self.d(1.5)), self.d(BELOW_TEN)), "wc")
        z2, hi, lo, _ = self.shifted(wc)
        s2 = self.zeta_series(z2, ONE_MINUS_EULER, ZETA2)
        middle = dm.add(s2, dm.add(self.call("log", hi), self.b("div", lo, hi)))
        big = self.let(self.call("fmax", w, self.d(10.0)), "big")
        stirling = dm.add(dm.fma(dm.sub(big, self.d(0.5)), self.call("log", big), self.m.neg(big)),
                          dm.add(self.d(0.5 * math.log(2 * math.pi)), self.stirling_series(big)))
        return self.sel(small, dm.sub(s1, self.call("log", w)),
                        self.sel(near1, s1, self.sel(mid, middle, stirling)))

    def gamma_positive(self, w: n.Expr) -> tuple[n.Expr, n.Expr]:
        """Gamma of a finite double ``w > 0`` as (a, b): Gamma = a * b, each finite where Gamma's
        reciprocal is (so that ``1 / Gamma`` can be taken as ``(1 / a) / b``)."""
        dm = self.dm
        w = self.let(w, "w")
        small = self.let(self.b("lt", w, self.d(0.5)), "small")
        near1 = self.let(self.b("lt", w, self.d(1.5)), "near1")
        mid = self.let(self.b("lt", w, self.d(10.0)), "mid")
        z1 = self.let(self.sel(small, w, dm.sub(w, self.d(1.0))), "z1")
        e1 = self.let(self.call("exp", self.zeta_series(z1, (-EULER[0], -EULER[1]), ZETA1)), "e1")
        wc = self.let(self.call("fmin", self.call("fmax", w, self.d(1.5)), self.d(BELOW_TEN)), "wc")
        z2, hi, lo, _ = self.shifted(wc)
        e2 = self.call("exp", self.zeta_series(z2, ONE_MINUS_EULER, ZETA2))
        middle = dm.mul(e2, dm.add(hi, lo))
        big = self.let(self.call("fmin", self.call("fmax", w, self.d(10.0)), self.d(400.0)), "big")
        t = self.let(self.call("pow", big, dm.mul(dm.sub(big, self.d(0.5)), self.d(0.5))), "t")
        first = dm.mul(dm.mul(t, self.call("exp", self.m.neg(big))),
                       dm.mul(self.d(math.sqrt(2 * math.pi)), self.call("exp", self.stirling_series(big))))
        a = self.sel(small, self.b("div", e1, w), self.sel(near1, e1, self.sel(mid, middle, first)))
        b = self.sel(mid, self.d(1.0), t)
        return a, b

    def value(self, fn: str, x: n.Expr) -> n.Expr:
        dm = self.dm
        x = self.let(x, "x")
        zero = self.d(0.0)
        negative = self.let(self.b("lt", x, zero), "negative")
        ax = self.call("fabs", x)
        w = self.let(self.sel(self.b("land", self.m.pred("isfinite", x), self.b("ne", x, zero)), ax, self.d(1.0)),
                     "w")
        s, _ = dm.sin_cos_pi(self.sel(negative, x, self.d(0.5)))
        s = self.let(s, "sinpi")
        pole = self.let(self.b("land", self.b("le", x, zero), self.b("eq", self.call("floor", x), x)), "pole")
        tiny = self.let(self.b("lt", w, self.d(2.0 ** -54)), "tiny")  # lgamma = -log|x|, Gamma = 1/x - gamma
        if fn == "lgamma":
            positive = self.let(self.lgamma_positive(w), "lgp")
            # Below 1/2: -log|x| - lgamma(|x|) = -Z1(|x|) (the logs cancel exactly); else one log of
            # pi / |x sinpi x| (one product, one quotient rounded).
            z1 = self.zeta_series(self.call("fmin", w, self.d(0.5)), (-EULER[0], -EULER[1]), ZETA1)
            abs_s = self.let(self.call("fabs", s), "abs_s")
            near = dm.sub(dm.sub(self.d(math.log(math.pi)), self.call("log", abs_s)), z1)
            far = dm.sub(self.call("log", self.b("div", self.d(math.pi), dm.mul(w, abs_s))), positive)
            reflected = self.sel(self.b("lt", w, self.d(0.5)), near, far)
            value = self.sel(negative, reflected, positive)
            value = self.sel(self.b("land", negative, tiny), self.m.neg(self.call("log", w)), value)
            value = self.sel(self.b("lor", self.b("eq", x, self.d(1.0)), self.b("eq", x, self.d(2.0))), zero, value)
            value = self.sel(self.b("lor", pole, self.m.pred("isinf", x)), self.d(math.inf), value)
            return self.sel(self.m.pred("isnan", x), x, value)
        a, b = self.gamma_positive(w)
        a, b = self.let(a, "ga"), self.let(b, "gb")
        huge = self.b("gt", x, self.d(171.7))
        value = self.sel(huge, self.d(math.inf), dm.mul(a, b))
        reflected = self.b("div", self.b("div", self.b("div", self.d(-math.pi), dm.mul(x, s)), a), b)
        value = self.sel(negative, reflected, value)
        value = self.sel(self.b("land", negative, tiny), dm.sub(self.b("div", self.d(1.0), x), self.d(EULER[0])),
                         value)
        value = self.sel(self.b("eq", x, zero), self.call("copysign", self.d(math.inf), x), value)
        value = self.sel(self.b("land", pole, self.b("ne", x, zero)), self.d(math.nan), value)
        return self.sel(self.b("lor", self.b("eq", x, self.d(math.inf)), self.m.pred("isnan", x)), x, value)


def gamma_double(dm, fn: str, x: n.Expr) -> n.Expr:
    assert x.type == F64
    return GammaDouble(dm).value(fn, x)
