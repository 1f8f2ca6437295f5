"""The math functions of ``polypy.ir.mathfns`` with their C meaning, keyed by canonical name.

Each entry takes NumPy values of the argument type (f32 or f64; integers for ``min``/``max``/
``abs``) and returns the result type. Transcendental f32 functions are computed in float64 and
rounded once to float32, which gives the correctly rounded result in all but astronomically
rare cases: a sharper oracle than CUDA's own 1-4 ulp ``sinf``/``expf``, so backends are compared
against it with a tolerance. Exact operations (``fabs``, ``floor``, ``fmin``, ``copysign``...)
run in the argument's own precision.

``fma`` is a single rounding of ``x*y + z`` (via round-to-odd, see ``_fma``), not ``x*y`` then
``+ z``: a kernel's result may legitimately depend on it.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from polypy.emulator.ops import scalar

Value = np.ndarray | np.generic
Impl = Callable[..., Value]


def _via_f64(fn: Callable[..., np.ndarray]) -> Impl:
    """Evaluate ``fn`` in float64 and round the result to the type of the first argument."""

    def run(*args: Value) -> Value:
        dtype = args[0].dtype
        wide = [np.asarray(a, dtype=np.float64) for a in args]
        return scalar(np.asarray(fn(*wide)).astype(dtype))

    return run


def _same(fn: Callable[..., np.ndarray]) -> Impl:
    """``fn`` is exact in any precision: evaluate in the argument's own type."""

    def run(*args: Value) -> Value:
        dtype = args[0].dtype
        return scalar(np.asarray(fn(*args)).astype(dtype))

    return run


def _pred(fn: Callable[[Value], np.ndarray]) -> Impl:
    return lambda x: scalar(np.asarray(fn(x)).astype(np.bool_))


_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _round_half_away(x: Value) -> Value:
    t = np.trunc(x)
    frac = np.subtract(x, t)  # exact
    return np.where(np.abs(frac) >= 0.5, t + np.sign(x), t)


def _saturate(x: Value) -> Value:
    return np.where(np.isnan(x), 0, np.clip(x, 0, 1))  # __saturatef(NaN) is 0


def _rsqrt(x: Value) -> Value:
    """``1 / sqrt(x)`` in the argument's precision: sqrt rounded, then the division rounded."""
    x = np.asarray(x)
    one = np.asarray(1.0, dtype=x.dtype)
    with np.errstate(all="ignore"):
        return scalar(np.asarray(one / np.sqrt(x)).astype(x.dtype))


def _fdim(x: Value, y: Value) -> Value:
    diff = np.subtract(x, y)
    return np.where(np.isnan(x) | np.isnan(y), diff, np.where(x > y, diff, 0))


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s + e == a + b exactly, s = fl(a + b) (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p + e == a * b exactly, p = fl(a * b) (Dekker, with Veltkamp splitting)."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, e


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = 134217729.0 * a  # 2**27 + 1
    hi = c - (c - a)
    return hi, a - hi


def _add_round_odd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b rounded to odd: truncated, with the last bit forced to 1 when inexact."""
    s, e = _two_sum(a, b)
    bits = s.view(np.int64)
    even = (bits & 1) == 0
    inexact = (e != 0) & np.isfinite(s)
    toward = np.nextafter(s, np.where(e > 0, np.inf, -np.inf))
    return np.where(inexact & even, toward, s)


def _fma(x: Value, y: Value, z: Value) -> Value:
    """x*y + z with one rounding (Boldo & Melquiond, "Emulation of FMA and correctly rounded
    sums: proved algorithms using rounding to odd", IEEE TC 2008)."""
    dtype = x.dtype
    a, b, c = (np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in (x, y, z))
    a, b, c = np.broadcast_arrays(a, b, c)
    plain = a * b + c
    if dtype == np.float32:
        # The product of two floats is exact in float64; one round-to-odd addition in 53 bits
        # followed by rounding to 24 bits is the correctly rounded result (53 >= 2*24 + 2).
        out = _add_round_odd(a * b, c).astype(np.float32)
        out = np.where(np.isfinite(plain), out, plain.astype(np.float32))
    else:
        p, pe = _two_prod(a, b)
        s, se = _two_sum(c, p)
        out = s + _add_round_odd(se, pe)
        # The error-free transforms need finite, non-overflowing, non-tiny intermediates; the
        # other finite cases are computed exactly (rare: a product or result near the ends of
        # the range), and infinite or NaN operands give IEEE's result.
        ok = np.isfinite(plain) & np.isfinite(p) & (np.abs(a * b) < 1e300) & ((np.abs(a * b) > 1e-250) | (a * b == 0))
        for v in (a, b, c):  # Veltkamp's split overflows above 2^996 and loses bits among subnormals
            ok &= (np.abs(v) < 1e280) & ((np.abs(v) > 1e-280) | (v == 0))
        out = np.where(ok, out, plain)
        for i in np.flatnonzero(~ok):
            out[i] = _fma_exact(float(a[i]), float(b[i]), float(c[i]), float(plain[i]))
    out = out.astype(dtype)
    if np.ndim(x) == 0 and np.ndim(y) == 0 and np.ndim(z) == 0:
        return out[0]
    return out


def _fma_exact(a: float, b: float, c: float, plain: float) -> float:
    """x*y + z of doubles rounded once, with fractions (exact integer division rounds correctly)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return plain  # inf * x, NaN: IEEE's result (a NaN or an infinity whatever c is)
    if not math.isfinite(c):
        return c  # a finite product plus an infinity (or NaN) is that
    from fractions import Fraction

    q = Fraction(a) * Fraction(b) + Fraction(c)
    if q == 0:
        product_negative = (math.copysign(1.0, a) * math.copysign(1.0, b)) < 0
        both_negative = a * b == 0 and product_negative and math.copysign(1.0, c) < 0
        return -0.0 if both_negative else 0.0
    try:
        return q.numerator / q.denominator
    except OverflowError:
        return math.inf if q > 0 else -math.inf  # (float(q) itself would overflow)


def _bitcast(x: Value, dtype: np.dtype) -> Value:
    """The bits of ``x`` read as ``dtype`` (NumPy's ``view``: NaN payloads and signs kept). Takes the
    result type as a second argument, unlike the others (``evaluate`` passes it)."""
    return scalar(np.asarray(x).view(dtype))


MATH_IMPLS: dict[str, Impl] = {
    "exp": _via_f64(np.exp),
    "exp2": _via_f64(np.exp2),
    "exp10": _via_f64(lambda x: np.power(10.0, x)),
    "expm1": _via_f64(np.expm1),
    "log": _via_f64(np.log),
    "log2": _via_f64(np.log2),
    "log10": _via_f64(np.log10),
    "log1p": _via_f64(np.log1p),
    "sqrt": _via_f64(np.sqrt),  # float64 sqrt rounded to f32 is the correctly rounded sqrtf
    "rsqrt": _rsqrt,
    "cbrt": _via_f64(np.cbrt),
    "sin": _via_f64(np.sin),
    "cos": _via_f64(np.cos),
    "tan": _via_f64(np.tan),
    "asin": _via_f64(np.arcsin),
    "acos": _via_f64(np.arccos),
    "atan": _via_f64(np.arctan),
    "sinh": _via_f64(np.sinh),
    "cosh": _via_f64(np.cosh),
    "tanh": _via_f64(np.tanh),
    "asinh": _via_f64(np.arcsinh),
    "acosh": _via_f64(np.arccosh),
    "atanh": _via_f64(np.arctanh),
    "erf": _via_f64(lambda x: np.asarray(_erf(x), dtype=np.float64)),
    "erfc": _via_f64(lambda x: np.asarray(_erfc(x), dtype=np.float64)),
    "fabs": _same(np.abs),
    "floor": _same(np.floor),
    "ceil": _same(np.ceil),
    "trunc": _same(np.trunc),
    "round": _same(_round_half_away),
    "rint": _same(np.rint),
    "saturate": _same(_saturate),
    "pow": _via_f64(np.power),
    "atan2": _via_f64(np.arctan2),
    "fmin": _same(np.fmin),  # a NaN operand is ignored, as in C
    "fmax": _same(np.fmax),
    "fmod": _same(np.fmod),
    "hypot": _via_f64(np.hypot),
    "copysign": _same(np.copysign),
    "fdim": _same(_fdim),
    "fma": _fma,
    "isnan": _pred(np.isnan),
    "isinf": _pred(np.isinf),
    "isfinite": _pred(np.isfinite),
    "signbit": _pred(np.signbit),
    "min": _same(np.minimum),
    "max": _same(np.maximum),
    "abs": _same(np.abs),  # abs(INT_MIN) wraps to INT_MIN, as on GPUs
    "bitcast": _bitcast,
}
