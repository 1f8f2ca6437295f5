"""The float Bessel functions ``j0f``, ``j1f``, ``y0f``, ``y1f``, ``cyl_bessel_i0f``,
``cyl_bessel_i1f`` (and the double ``j0``, ``j1``, ``cyl_bessel_i0``, ``cyl_bessel_i1``: see
``bessel_j_double``, ``bessel_i``; the double ``y0``, ``y1``: ``frontend.lower.bessel_y_double``) in
device code, written in IR and computed in double (a few double ulps of absolute error, far below
CUDA's float bounds), rounded once to float.

- ``|x| < 12``: the power series (Abramowitz and Stegun 9.1.10, 9.1.11) in ``q = x^2 / 4``:
  ``J_n = (x/2)^n sum (-q)^k / (k! (n+k)!)``, ``Y_0 = (2/pi) (log(x/2) + gamma) J_0 + (2/pi) sum
  (-1)^(k+1) H_k q^k / (k!)^2``, ``Y_1 = -2/(pi x) + (2/pi) log(x/2) J_1 - (x/(2 pi)) sum
  (psi(k+1) + psi(k+2)) (-q)^k / (k! (k+1)!)``, 35 terms (truncation below 1e-25).
- ``|x| >= 12``: Hankel's asymptotic expansion (A&S 9.2.5-9.2.10) ``sqrt(2/(pi x)) (P cos chi -
  Q sin chi)`` (``Y``: ``P sin chi + Q cos chi``), ``chi = x - (2n+1) pi/4``, its cosine and sine from
  ``cos x`` and ``sin x`` (exact reductions of the float ``x``, no rounded ``chi``), ``P`` and
  ``Q`` to 10 terms each (relative error below 1e-11 at 12; CUDA documents an absolute error of
  2.2e-6 from 8 on).
- ``J_0`` is even, ``J_1`` odd; ``Y_n`` of a negative ``x`` is NaN, of zero ``-inf``; ``J_n`` and
  ``Y_n`` of an infinity are 0, of NaN NaN.
- ``I_0``, ``I_1`` (float, and double too): the power series ``(x/2)^n sum q^k / (k! (n+k)!)``
  (positive terms; in double ``q`` in double-double and Horner's rule compensated) below 15
  (double: 22), ``e^(x/2) e^(x/2) / sqrt(2 pi x)`` times the asymptotic
  series (A&S 9.7.1) from there on, truncated near its smallest term (about ``e^(-2x)``);
  ``I_0`` even, ``I_1`` odd, ``I_1(+-0) = +-0``.
"""
from __future__ import annotations

import math
from fractions import Fraction

from polypy.ir import nodes as n
from polypy.ir.types import F32, F64

EULER = 0.5772156649015329
SERIES_END = 12.0  # the power series below (its absolute error about 1e-12 at 12), Hankel's above
SERIES_TERMS = 35  # q^k / (k!)^2 below 1e-25 at q = 36
HANKEL_TERMS = 10  # of P and of Q: about the smallest term at 12 (relative error below 1e-11)
DOUBLE_SERIES_END = 16.0  # double j0, j1: the series (q <= 64) below, Hankel's expansion above
DOUBLE_TERMS = 42  # q^k / (k!)^2 below 1e-20 at q = 64
DOUBLE_HANKEL_TERMS = 14
# The zeros of J0, J1 below 8 as two doubles and J^(m)(zero) / m!, m = 1..7 (mpmath, a fact): within
# 0.01 of one, J is its Taylor series in x - zero (the series' cancellation would cost ulps there).
J_ZEROS = {
    0: ((2.404825557695773, -1.176691651530894e-16,
         (-0.5191474972894667, 0.1079387017549201, 0.05660177443794623, -0.008657669593304914,
          -0.002194200359016156, 0.00026437703675269815, 4.372919272906665e-05)),
        (5.520078110286311, 8.088597146146722e-17,
         (0.34026480655836816, -0.030820651425593648, -0.05298855286760463, 0.004631042145907645,
          0.0022574402290329, -0.00017518572899415777, -4.652109073974323e-05))),
    1: ((3.8317059702075125, -1.5269184090088067e-16,
         (-0.402759395702553, 0.05255614585697724, 0.05341044413272481, -0.00517971924563857,
          -0.002233125339147478, 0.00017466429072012055, 4.6208701297458374e-05)),
        (7.015586669815619, -9.414165653410389e-17,
         (0.30011575252613254, -0.02138921280934158, -0.04697047894974149, 0.003130291726048091,
          0.0021055871432482764, -0.00012550790955145584, -4.499147530293068e-05))),
}
ZERO_WINDOW = 0.01
BESSEL = ("j0", "j1", "y0", "y1", "cyl_bessel_i0", "cyl_bessel_i1")


def _hankel(nu: int, count: int) -> list[float]:
    """a_k(nu) = prod_{j=1..k} (4 nu^2 - (2j-1)^2) / (k! 8^k), k = 0 .. count-1."""
    out, a = [], 1.0
    for k in range(count):
        out.append(a)
        a = a * (4 * nu * nu - (2 * k + 1) ** 2) / ((k + 1) * 8)
    return out


class Bessel:
    def __init__(self, dm) -> None:
        self.dm = dm
        self.m = dm.m
        self.d, self.b, self.call, self.sel, self.let = dm.d, dm.b, dm.call, dm.sel, dm.let

    def series(self, q: n.Expr, coefficients: list[float]) -> n.Expr:
        out = self.d(0.0)
        for c in reversed(coefficients):
            out = self.dm.fma(out, q, self.d(c))
        return out

    def small(self, fn: str, x: n.Expr) -> n.Expr:
        """J/Y of a double ``0 < x < 8`` (clamped by the caller) by the power series."""
        dm = self.dm
        q = self.let(dm.mul(dm.mul(x, x), self.d(0.25)), "q")
        nu = 1 if fn in ("j1", "y1") else 0
        j = self.series(q, [(-1) ** k / (math.factorial(k) * math.factorial(k + nu)) for k in range(SERIES_TERMS)])
        if nu:
            j = dm.mul(j, dm.mul(x, self.d(0.5)))
        if fn in ("j0", "j1"):
            return j
        log_half = self.let(self.call("log", dm.mul(x, self.d(0.5))), "lhalf")
        if fn == "y0":
            harmonic = [0.0] + [(-1) ** (k + 1) * sum(1.0 / i for i in range(1, k + 1)) / math.factorial(k) ** 2
                                for k in range(1, SERIES_TERMS)]
            rest = self.series(q, harmonic)
            return dm.mul(self.d(2 / math.pi), dm.fma(dm.add(log_half, self.d(EULER)), j, rest))
        psi = [(-1) ** k * (2 * sum(1.0 / i for i in range(1, k + 1)) + 1.0 / (k + 1) - 2 * EULER) /
               (math.factorial(k) * math.factorial(k + 1)) for k in range(SERIES_TERMS)]
        rest = dm.mul(self.series(q, psi), dm.mul(x, self.d(0.5 / math.pi)))
        lead = self.b("div", self.d(-2 / math.pi), x)
        return dm.sub(dm.add(lead, dm.mul(self.d(2 / math.pi), dm.mul(log_half, j))), rest)

    def large(self, fn: str, x: n.Expr, terms: int = 0) -> n.Expr:
        """J/Y of a finite double ``x >= 12`` by Hankel's expansion (``terms`` of P and Q)."""
        dm = self.dm
        nu = 1 if fn in ("j1", "y1") else 0
        terms = terms or HANKEL_TERMS
        a = _hankel(nu, 2 * terms)
        inv = self.let(self.b("div", self.d(1.0), x), "inv")
        inv2 = self.let(dm.mul(inv, inv), "inv2")
        p = self.series(inv2, [(-1) ** k * a[2 * k] for k in range(terms)])
        q = dm.mul(self.series(inv2, [(-1) ** k * a[2 * k + 1] for k in range(terms)]), inv)
        c, s = self.let(self.call("cos", x), "cx"), self.let(self.call("sin", x), "sx")
        r = math.sqrt(0.5)
        if nu == 0:  # chi = x - pi/4
            cos_chi, sin_chi = dm.mul(dm.add(c, s), self.d(r)), dm.mul(dm.sub(s, c), self.d(r))
        else:  # chi = x - 3 pi/4
            cos_chi, sin_chi = dm.mul(dm.sub(s, c), self.d(r)), dm.mul(self.m.neg(dm.add(s, c)), self.d(r))
        cos_chi, sin_chi = self.let(cos_chi, "cchi"), self.let(sin_chi, "schi")
        amplitude = self.call("sqrt", self.b("div", self.d(2 / math.pi), x))
        if fn in ("j0", "j1"):
            body = dm.sub(dm.mul(p, cos_chi), dm.mul(q, sin_chi))
        else:
            body = dm.add(dm.mul(p, sin_chi), dm.mul(q, cos_chi))
        return dm.mul(amplitude, body)

    def bessel_jy(self, fn: str, x: n.Expr) -> n.Expr:
        return self.m.cast(self.bessel_jy_double(fn, self.m.cast(x, F64)), F32)

    def bessel_jy_double(self, fn: str, x: n.Expr) -> n.Expr:
        """J/Y of the double ``x`` (a float's value), in double."""
        xd = self.let(x, "xd")
        ax = self.let(self.call("fabs", xd), "ax")
        finite = self.m.pred("isfinite", ax)
        near = self.let(self.call("fmin", self.call("fmax", ax, self.d(1e-300)), self.d(SERIES_END)), "near")
        far = self.let(self.sel(finite, self.call("fmax", ax, self.d(SERIES_END)), self.d(SERIES_END)), "far")
        value = self.sel(self.b("lt", ax, self.d(SERIES_END)), self.small(fn, near), self.large(fn, far))
        value = self.sel(finite, value, self.d(0.0))
        if fn == "j1":
            value = self.sel(self.m.pred("signbit", xd), self.m.neg(value), value)
            value = self.sel(self.b("eq", xd, self.d(0.0)), xd, value)  # j1(+-0) = +-0
        elif fn == "j0":
            value = self.sel(self.b("eq", xd, self.d(0.0)), self.d(1.0), value)
        else:
            value = self.sel(self.b("eq", xd, self.d(0.0)), self.d(-math.inf), value)
            value = self.sel(self.b("lt", xd, self.d(0.0)), self.d(math.nan), value)
        return self.sel(self.m.pred("isnan", xd), xd, value)

    def bessel_j_double(self, fn: str, x: n.Expr) -> n.Expr:
        """The double ``j0``, ``j1``: below 16 the power series with ``q = x^2/4`` and the
        coefficients (exact rationals) in double-double, Horner's rule in double-double (so that
        cancellation costs little), within 0.01 of a zero below 8 the Taylor series about it
        (``J_ZEROS``); from 16 on Hankel's expansion with 14 terms of ``P`` and ``Q`` (absolute error
        below 5e-16; CUDA documents 5e-12 from 8 on)."""
        dm = self.dm
        nu = 1 if fn == "j1" else 0
        x = self.let(x, "x")
        ax = self.let(self.call("fabs", x), "ax")
        near = self.let(self.call("fmin", ax, self.d(DOUBLE_SERIES_END)), "near")
        qh, ql = dm.two_prod(near, near)
        qh, ql = self.let(dm.mul(qh, self.d(0.25)), "qh"), self.let(dm.mul(ql, self.d(0.25)), "ql")
        coefficients = [Fraction((-1) ** k, math.factorial(k) * math.factorial(k + nu)) for k in range(DOUBLE_TERMS)]
        ph, pl = self.dd_horner(qh, ql, coefficients)
        if nu:  # (x/2) (ph + pl)
            half = dm.mul(near, self.d(0.5))
            m, me = dm.two_prod(ph, half)
            small = dm.add(m, dm.fma(pl, half, me))
        else:
            small = dm.add(ph, pl)
        far = self.let(self.sel(self.m.pred("isfinite", ax), self.call("fmax", ax, self.d(DOUBLE_SERIES_END)),
                                self.d(DOUBLE_SERIES_END)), "far")
        large = self.large(fn, far, DOUBLE_HANKEL_TERMS)
        value = self.sel(self.b("lt", ax, self.d(DOUBLE_SERIES_END)), small, large)
        for zh, zl, taylor in J_ZEROS[nu]:
            t = self.let(dm.sub(dm.sub(ax, self.d(zh)), self.d(zl)), "t")  # ax - zh exact there
            poly = self.series(t, list(taylor))
            value = self.sel(self.b("lt", self.call("fabs", t), self.d(ZERO_WINDOW)), dm.mul(t, poly), value)
        value = self.sel(self.m.pred("isinf", ax), self.d(0.0), value)
        if nu:
            value = self.sel(self.m.pred("signbit", x), self.m.neg(value), value)  # odd: j1(-0) = -0
        return self.sel(self.m.pred("isnan", x), x, value)

    def dd_horner(self, qh: n.Expr, ql: n.Expr, coefficients: list[Fraction]) -> tuple[n.Expr, n.Expr]:
        """sum c_k q^k by Horner's rule in double-double: ``q = qh + ql``, the exact rational
        coefficients as two doubles each; the sum as (high, low)."""
        dm = self.dm
        ph, pl = self.d(float(coefficients[-1])), self.d(0.0)
        for c in reversed(coefficients[:-1]):
            ch = float(c)
            cl = float(c - Fraction(ch))
            m, me = dm.two_prod(ph, qh)
            me = dm.fma(ph, ql, dm.fma(pl, qh, me))
            s, se = dm.two_sum(m, self.d(ch))
            low = self.let(dm.add(dm.add(se, me), self.d(cl)), "low")
            ph = self.let(dm.add(s, low), "ph")
            pl = self.let(dm.sub(low, dm.sub(ph, s)), "pl")
        return ph, pl

    def bessel_i(self, fn: str, x: n.Expr) -> n.Expr:
        """I_0, I_1 of a float (in double) or of a double: the series below ``end``, the
        asymptotic series from there on (truncated near its smallest term, about e^(-2 end))."""
        dm = self.dm
        ty = x.type
        end, terms, tail_terms = (15.0, 40, 24) if ty == F32 else (22.0, 52, 42)
        nu = 1 if fn == "cyl_bessel_i1" else 0
        xd = self.let(self.m.cast(x, F64), "xd")
        ax = self.let(self.call("fabs", xd), "ax")
        near = self.let(self.call("fmin", ax, self.d(end)), "near")
        coefficients = [1.0 / (math.factorial(k) * math.factorial(k + nu)) for k in range(terms)]
        if ty == F32:
            q = self.let(dm.mul(dm.mul(near, near), self.d(0.25)), "q")
            small = self.series(q, coefficients)
        else:  # q in double-double and Horner's rule compensated (each step's errors carried)
            qh, ql = dm.two_prod(near, dm.mul(near, self.d(0.5)))
            qh, ql = self.let(dm.mul(qh, self.d(0.5)), "qh"), self.let(dm.mul(ql, self.d(0.5)), "ql")
            p, err = self.d(coefficients[-1]), self.d(0.0)
            for c in reversed(coefficients[:-1]):
                t, te = dm.two_prod(p, qh)
                new_p, se = dm.two_sum(t, self.d(c))
                err = self.let(dm.fma(err, qh, dm.add(dm.add(te, se), dm.mul(p, ql))), "herr")
                p = new_p
            small = dm.add(p, err)
        if nu:
            small = dm.mul(small, dm.mul(near, self.d(0.5)))
        far = self.let(self.sel(self.m.pred("isfinite", ax), self.call("fmax", ax, self.d(end)), self.d(end)), "far")
        inv = self.b("div", self.d(1.0), far)
        a = _hankel(nu, tail_terms)
        tail = self.series(inv, [(-1) ** k * a[k] for k in range(tail_terms)])
        # e^x / sqrt(2 pi x): e^(x/2) twice so that no factor overflows before the result
        half = self.let(self.call("exp", dm.mul(far, self.d(0.5))), "half")
        large = dm.mul(dm.mul(half, self.b("div", tail, self.call("sqrt", dm.mul(far, self.d(2 * math.pi))))), half)
        value = self.sel(self.b("lt", ax, self.d(end)), small, large)
        value = self.sel(self.m.pred("isinf", ax), self.d(math.inf), value)
        if nu:
            value = self.call("copysign", value, xd)
        value = self.sel(self.m.pred("isnan", xd), xd, value)
        return self.m.cast(value, ty)

    def value(self, fn: str, x: n.Expr) -> n.Expr:
        if x.type == F64 and fn in ("j0", "j1"):
            return self.bessel_j_double(fn, x)
        if fn.startswith("cyl_bessel_i"):
            return self.bessel_i(fn, x)
        return self.bessel_jy(fn, x)
