"""Bit-exact references for binary16 and bfloat16 arithmetic, written independently of polypy's
headers: exact rational values (``fractions.Fraction``) rounded to the format by the definition of
IEEE rounding. Used by tests/test_half.py and samples/half_axpy.py."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

HALF = (10, 5)      # fraction bits, exponent bits
BFLOAT16 = (7, 8)
CANONICAL_NAN = 0x7FFF


def value(bits: int, fmt: tuple[int, int]) -> Fraction | float:
    """The value of 16-bit ``bits`` in ``fmt``: a Fraction, or a float inf / nan."""
    if fmt == HALF:
        f = float(np.uint16(bits).view(np.float16))
    else:
        f = float(np.uint32(int(bits) << 16).view(np.float32))
    return f if math.isinf(f) or math.isnan(f) else Fraction(f)


def to_float(bits: int, fmt: tuple[int, int]) -> float:
    """The value of ``bits`` as a float (exact; keeps the sign of zero)."""
    if fmt == HALF:
        return float(np.uint16(bits).view(np.float16))
    return float(np.uint32(int(bits) << 16).view(np.float32))


def round_to(x: Fraction | float, fmt: tuple[int, int], mode: str = "rn") -> int:
    """``x`` rounded to ``fmt`` (mode rn, rz, rd or ru): the 16 bits."""
    mbits, ebits = fmt
    sign_bit = 1 << (mbits + ebits)
    inf = ((1 << ebits) - 1) << mbits
    if isinstance(x, float):
        if math.isnan(x):
            return CANONICAL_NAN
        if math.isinf(x):
            return inf | (sign_bit if x < 0 else 0)
        x = Fraction(x)
    negative = x < 0
    ax = -x if x < 0 else x
    if ax == 0:
        return 0
    bias = (1 << (ebits - 1)) - 1
    emin = 1 - bias
    e = ax.numerator.bit_length() - ax.denominator.bit_length()
    if Fraction(2) ** e > ax:
        e -= 1
    if Fraction(2) ** (e + 1) <= ax:
        e += 1
    e = max(e, emin)
    m = ax / Fraction(2) ** (e - mbits)
    q = math.floor(m)
    r = m - q
    away = {"rn": r > Fraction(1, 2) or (r == Fraction(1, 2) and q % 2 == 1),
            "rz": False, "ru": r > 0 and not negative, "rd": r > 0 and negative}[mode]
    q += int(away)
    if q >= 1 << (mbits + 1):
        q >>= 1
        e += 1
    biased = e + bias if q >= 1 << mbits else 0
    frac = q - (1 << mbits) if q >= 1 << mbits else q
    sign = sign_bit if negative else 0
    if biased >= (1 << ebits) - 1:
        overflow_to_inf = mode == "rn" or (mode == "ru" and not negative) or (mode == "rd" and negative)
        return sign | (inf if overflow_to_inf else inf - 1)
    return sign | (biased << mbits) | frac


_NP = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}


def _special(r: float, fmt: tuple[int, int]) -> int:
    """A zero (with its sign), infinity or NaN result computed in float64."""
    mbits, ebits = fmt
    if r == 0:
        return (1 << (mbits + ebits)) if math.copysign(1.0, r) < 0 else 0
    return round_to(r, fmt)


def binary(op: str, a: int, b: int, fmt: tuple[int, int]) -> int:
    """a op b for 16-bit operands, rounded to nearest even. float64 decides zeros (and their
    signs), infinities and NaNs: it gets those exactly for 16-bit operands (no result of a
    nonzero exact value underflows or overflows in float64); the rest is the exact rational."""
    x, y = value(a, fmt), value(b, fmt)
    with np.errstate(all="ignore"):
        r = float(_NP[op](np.float64(to_float(a, fmt)), np.float64(to_float(b, fmt))))
    if r == 0 or math.isinf(r) or math.isnan(r):
        return _special(r, fmt)
    exact = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "/": lambda: x / y}[op]()
    return round_to(exact, fmt)


def fma(a: int, b: int, c: int, fmt: tuple[int, int]) -> int:
    """a * b + c rounded once (float64 for the specials, as in ``binary``: a * b is exact there)."""
    x, y, z = value(a, fmt), value(b, fmt), value(c, fmt)
    with np.errstate(all="ignore"):
        r = float(np.float64(to_float(a, fmt)) * np.float64(to_float(b, fmt)) + np.float64(to_float(c, fmt)))
    if r == 0 or math.isinf(r) or math.isnan(r):
        return _special(r, fmt)
    return round_to(x * y + z, fmt)


def sqrt(a: int, fmt: tuple[int, int]) -> int:
    x = value(a, fmt)
    if isinstance(x, float) or x <= 0:
        with np.errstate(all="ignore"):
            return _special(float(np.sqrt(np.float64(to_float(a, fmt)))), fmt)
    guess = round_to(Fraction(math.sqrt(float(x))), fmt)
    best = guess
    for cand in (guess - 1, guess + 1):
        v, w = value(cand, fmt), value(best, fmt)
        if isinstance(v, float):
            continue
        mid = (v + w) / 2  # v is nearer sqrt(x) than w iff sqrt(x) is on v's side of the midpoint
        if (mid * mid > x) == (v < w) and mid * mid != x:
            best = cand
    return best


def edge_bits(fmt: tuple[int, int]) -> list[int]:
    """Edge operands: zeros, smallest/largest subnormals, smallest normal, largest finite, ones,
    infinities and NaNs, both signs."""
    mbits, ebits = fmt
    inf = ((1 << ebits) - 1) << mbits
    one = ((1 << (ebits - 1)) - 1) << mbits
    sign = 1 << (mbits + ebits)
    base = [0, 1, (1 << mbits) - 1, 1 << mbits, inf - 1, one, one + 1, one - 1, inf, inf | 1, inf | (1 << (mbits - 1)),
            one + (1 << mbits), 2, 3]
    return base + [b | sign for b in base]


def same_bits(got: np.ndarray, want: np.ndarray, fmt, what: str) -> None:
    """Bit equality, except that every NaN equals every NaN (the reference's NaN is canonical)."""
    mbits, ebits = fmt
    inf = ((1 << ebits) - 1) << mbits
    got = got.astype(np.int64).reshape(want.shape)
    want = want.astype(np.int64)
    gn, wn = (got & 0x7FFF) > inf, (want & 0x7FFF) > inf
    bad = np.argwhere((gn != wn) | (~gn & (got != want)))
    assert bad.size == 0, f"{what}: {len(bad)} mismatches, first at {tuple(bad[0])}: got {got[tuple(bad[0])]:#06x}, " \
                          f"want {want[tuple(bad[0])]:#06x}"
