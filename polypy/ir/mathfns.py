"""The math functions the IR knows, by canonical name.

``Call.fn`` is a canonical name; the precision comes from the argument types. The frontend
maps CUDA spellings (``expf``, ``exp``, ``__expf``, ``rsqrtf``...) to these names; the emulator,
the code generators and the derivative rules each key their own tables by the same names, and a
test checks that every name here has an entry in each of them.
"""
from __future__ import annotations

import dataclasses
import decimal
import math
import struct

from polypy.ir.types import F32, F64, I32, I64, U32, ScalarType


# Semantics: each function is the C library function of that precision (f32: ``expf``...), and
# ``rsqrt`` is ``1 / sqrt(x)`` computed in the argument's precision (a rounded square root, then a
# rounded division), ``saturate`` clamps to [0, 1], ``exp10`` is ``10^x``. Every backend and the
# emulator implement exactly these.


# f32 ``exp`` as the code generators write it out (the C prelude's ``polypy_expf``, the LLVM
# backend's inline sequence): libm's ``expf`` is an opaque call that no loop vectorizer takes, and
# this is the loop body of softmax-style kernels. In double precision: ``x = k ln2 + r`` with
# ``k = rint(x * log2(e))``, ``|r| <= ln2 / 2``; ``exp(r)`` by its Taylor polynomial of degree 10
# (relative error below 2^-40); times ``2^k`` built in the exponent bits; one rounding to float.
# Exhaustively checked against ``exp((double)x)``: at most 0.5000 ulp (correctly rounded but for
# near-halfway cases, as glibc's expf; CUDA documents 2 ulp), overflow to +inf, gradual underflow.
# ``|x|`` is first clamped to 104 on its bits (``exp(+-104)`` is already inf / 0 in float; a NaN
# too, so that no NaN reaches the conversion of k to an integer), and the result of a NaN made a
# NaN on its bits at the end: the sequence has no branch.
EXPF_LOG2E = 1.0 / math.log(2.0)
EXPF_LN2 = math.log(2.0)
EXPF_CLAMP_BITS = 0x42D00000  # 104.0f
EXPF_TAYLOR = tuple(1.0 / math.factorial(i) for i in range(11))  # 1, 1, 1/2, ..., 1/10!


def _exp_constants(bits: int) -> tuple[tuple[float, ...], tuple[float, ...], float, float, float]:
    """``2^(j / 2^bits)`` for each j as a double plus its rounding error, ``2^bits / ln2``, and
    ``ln2 / 2^bits`` in two parts, the first with 32 significant bits (so that ``k`` times it is
    exact for any ``|k| < 2^21``)."""
    with decimal.localcontext() as context:
        context.prec = 60
        ln2 = decimal.Decimal(2).ln()
        size = 1 << bits
        values = [(decimal.Decimal(j) / size * ln2).exp() for j in range(size)]
        hi = tuple(float(v) for v in values)
        lo = tuple(float(v - decimal.Decimal(h)) for v, h in zip(values, hi))
        step = ln2 / size
        (word,) = struct.unpack("<Q", struct.pack("<d", float(step)))
        (step_hi,) = struct.unpack("<d", struct.pack("<Q", word & ~((1 << 20) - 1)))
        return hi, lo, float(size / ln2), step_hi, float(step - decimal.Decimal(step_hi))


# f64 ``exp`` likewise (the prelude's ``polypy_exp``; Rodinia lavaMD spends half its time in
# libm's exp): ``x = (16 k + j) ln2 / 16 + r``, ``|r| <= ln2 / 32``, r kept as two doubles;
# ``exp(x) = 2^k * 2^(j/16) * exp(r)`` with ``2^(j/16)`` from a 16-entry table of double pairs
# (value and rounding error) and ``exp(r) - 1 = r + r^2 q(r)``, q of degree 6 (truncation below
# 2^-68); ``2^k`` applied in two halves, so that results near overflow and subnormal ones come
# out right. Measured against glibc's ``expl`` on 4 * 10^7 arguments over the whole range: at most
# 0.57 ulp where the result is normal, 0.75 ulp where it is subnormal (below 2.2e-308; rounded twice
# there); CUDA documents 1 ulp for exp. ``|x|`` clamped to 746 (``exp(+-746)`` is already inf / 0).
EXP_TABLE_BITS = 4
EXP_TABLE_SIZE = 1 << EXP_TABLE_BITS
EXP_TABLE_HI, EXP_TABLE_LO, EXP_INV_STEP, EXP_STEP_HI, EXP_STEP_LO = _exp_constants(EXP_TABLE_BITS)
EXP_CLAMP_BITS = 0x4087500000000000  # 746.0
EXP_Q = tuple(1.0 / math.factorial(i) for i in range(2, 9))  # q(r) = 1/2 + r/6 + ... + r^6/8!
# kd = 16 k + j (0 <= j < 16): k = rint(kd / 16 - 15/32) (GCC vectorizes rint, not floor), and
# floor(k / 2) = rint(k / 2 - 1/4). Integers are read from doubles in the low bits of
# ``n + EXP_SHIFTER`` (2^52 + 2^51), not converted: no packed double -> 64-bit integer conversion
# before AVX-512.
EXP_K_OFFSET = 0.5 - 0.5 / EXP_TABLE_SIZE
EXP_SHIFTER = 6755399441055744.0


# f32 ``tanh`` likewise (the prelude's ``polypy_tanhf``; LSTM-style cells compute it per element),
# in double precision on ``a = |x|``: ``tanh(a) = e / (e + 2)`` with ``e = expm1(2a)``, which has
# no cancellation for small ``a``; ``2a = k ln2 + t`` (``k = rint(2a log2(e))``, ``|t| <= ln2 / 2``,
# t exact when k = 0), ``expm1(2a) = 2^k expm1(t) + (2^k - 1)``, ``expm1(t) = t + t^2 q(t)`` with q
# the Taylor polynomial of degree 10 (truncation below 2^-50 relative). Relative error of the
# double result below 2^-46, then one rounding to float. On all 2^32 arguments (``python -m
# bench.math_exhaustive tanhf``): the same float as glibc's double ``tanh`` rounded, at most 0.5000
# ulp (CUDA documents 2 ulp; glibc 2.36's ``tanhf``: 2.19 ulp, 1.2e8 results not correctly rounded). ``a`` is first clamped to 10 on its bits
# (``tanhf(x)`` is 1 from 9.011 on; NaN and inf too), the sign put back on the bits (so ``-0`` stays
# ``-0``) and a NaN's result made a NaN at the end: no branch.
TANHF_CLAMP_BITS = 0x41200000  # 10.0f
TANHF_Q = tuple(1.0 / math.factorial(i) for i in range(2, 13))  # q(t) = 1/2 + t/6 + ... + t^10/12!


# f64 ``tanh`` likewise (the prelude's ``polypy_tanh``; LLTM-style cells in double precision):
# ``tanh(a) = e / (e + 2)``, ``a = |x|``, ``e = expm1(2a)`` as a sum of two doubles from ``exp``'s
# reduction above (``exp(2a) = 2^k (t_hi + t_lo)(1 + r + em)``, with ``k >= 0`` here): ``s t_hi - 1``
# and ``s t_hi r`` exactly (Dekker's product of halves split at 2^27 + 1, no fma), the small terms
# added. The quotient ``y0 = eh / (eh + 2)`` is then corrected once by the exact residual
# ``eh + el - y0 (d + dl)`` over ``d``. Measured against ``tanhl`` (x87 extended precision) on
# 10^8 random and edge arguments (``python -m bench.math_exhaustive tanh``): at most 0.516 ulp;
# glibc 2.36's ``tanh``: 2.17 ulp; CUDA documents 1. ``a`` is clamped to 22 on its bits (tanh is 1
# in double from 19.06 on; inf and NaN too), the sign put back on the bits (``-0`` stays ``-0``),
# a NaN's result made a NaN at the end: no branch.
TANH_CLAMP_BITS = 0x4036000000000000  # 22.0
TANH_SPLIT = 134217729.0  # 2^27 + 1


@dataclasses.dataclass(frozen=True, slots=True)
class MathFn:
    name: str
    arity: int
    domain: str  # "float": f32/f64 arguments; "int": integer arguments; "bits": see ``bitcast``
    returns_bool: bool = False


_FLOAT1 = (
    "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "cbrt",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "erf", "erfc", "fabs", "floor", "ceil", "trunc", "round", "rint", "saturate",
)
_FLOAT2 = ("pow", "atan2", "fmin", "fmax", "fmod", "hypot", "copysign", "fdim")
_FLOAT3 = ("fma",)
_FLOAT_PRED = ("isnan", "isinf", "isfinite", "signbit")

MATH_FUNCTIONS: dict[str, MathFn] = {}
for _n in _FLOAT1:
    MATH_FUNCTIONS[_n] = MathFn(_n, 1, "float")
for _n in _FLOAT2:
    MATH_FUNCTIONS[_n] = MathFn(_n, 2, "float")
for _n in _FLOAT3:
    MATH_FUNCTIONS[_n] = MathFn(_n, 3, "float")
for _n in _FLOAT_PRED:
    MATH_FUNCTIONS[_n] = MathFn(_n, 1, "float", returns_bool=True)
# Integer helpers: CUDA's min/max/abs on integers (umin/umax/llmin... map here too).
MATH_FUNCTIONS["min"] = MathFn("min", 2, "int")
MATH_FUNCTIONS["max"] = MathFn("max", 2, "int")
MATH_FUNCTIONS["abs"] = MathFn("abs", 1, "int")
# ``bitcast``: the bits of the argument read as the result type, which has the same size and the
# other kind (f32 <-> i32/u32, f64 <-> i64/u64); never a value conversion. ``Call.rtype`` is the
# target (the IR text spells it ``bitcast<i32>(x)``). CUDA's ``__float_as_int`` and relatives and
# the pointer punning ``*(int*)&f`` of a local variable become this one operation.
MATH_FUNCTIONS["bitcast"] = MathFn("bitcast", 1, "bits")


def is_bit_cast(source: ScalarType, target: ScalarType) -> bool:
    """Whether ``bitcast`` from ``source`` to ``target`` is well formed (same size, other kind)."""
    return source.bits == target.bits and source.is_float != target.is_float and \
        not source.is_bool and not target.is_bool and source.bits in (32, 64)


# The CUDA intrinsics that are one bit cast: name -> (argument type, result type).
BIT_CAST_INTRINSICS: dict[str, tuple[ScalarType, ScalarType]] = {
    "__float_as_int": (F32, I32), "__float_as_uint": (F32, U32),
    "__int_as_float": (I32, F32), "__uint_as_float": (U32, F32),
    "__double_as_longlong": (F64, I64), "__longlong_as_double": (I64, F64),
}


def bit_cast_spelling(source: ScalarType, target: ScalarType) -> tuple[str, ScalarType, ScalarType]:
    """The CUDA intrinsic that spells ``bitcast<target>(x: source)``, with its own argument and
    result types (CUDA has no unsigned 64-bit one: ``u64`` goes through ``long long``)."""
    for name, (a, r) in BIT_CAST_INTRINSICS.items():
        if a == source and r == target:
            return name, a, r
    for name, (a, r) in BIT_CAST_INTRINSICS.items():
        if a.bits == source.bits and a.is_float == source.is_float and r.bits == target.bits:
            return name, a, r
    raise KeyError(f"bitcast {source} -> {target}")


def _cuda_spellings() -> dict[str, str]:
    """CUDA/C spelling -> canonical name, float and double variants and fast intrinsics."""
    table: dict[str, str] = {}
    for name, fn in MATH_FUNCTIONS.items():
        if fn.domain != "float":
            continue
        table[name] = name
        table[name + "f"] = name
        table["__" + name + "f"] = name  # __expf, __logf, __sinf, __powf ... (fast variants)
    table["fabs"] = "fabs"
    table["fabsf"] = "fabs"
    table["saturate"] = "saturate"
    table["__saturatef"] = "saturate"
    table["rsqrt"] = "rsqrt"
    table["rsqrtf"] = "rsqrt"
    table["__frsqrt_rn"] = "rsqrt"
    for prefix in ("", "u", "ll", "ull"):
        table[prefix + "min"] = "min"
        table[prefix + "max"] = "max"
    table["abs"] = "abs"
    # glibc's and CUDA's classification functions (``__isnanf`` and ``__isinff`` are above).
    table.update({"__isnan": "isnan", "__isinf": "isinf", "__finitef": "isfinite", "__finite": "isfinite",
                  "__signbit": "signbit"})
    table["llabs"] = "abs"
    table["labs"] = "abs"
    # std:: overloads and C++ math overloads resolve to the same names (float or double by type).
    return table


CUDA_MATH_NAMES: dict[str, str] = _cuda_spellings()

# Binary arithmetic the frontend accepts as intrinsic calls: __fdividef(a, b) etc.
CUDA_ARITH_INTRINSICS: dict[str, str] = {
    "__fdividef": "div", "__fdiv_rn": "div", "__ddiv_rn": "div",
    "__fadd_rn": "add", "__dadd_rn": "add", "__fsub_rn": "sub", "__dsub_rn": "sub",
    "__fmul_rn": "mul", "__dmul_rn": "mul",
}
