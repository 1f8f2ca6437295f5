"""The emulator's operators, conversions and math functions against C semantics.

References are computed independently of the emulator: Python integers with explicit two's
complement wrapping for integer operators, NumPy/``math``/``fractions`` for math functions.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from test_emulator_support import expect_error, kernel

from polypy.emulator import emulate
from polypy.emulator.mathlib import MATH_IMPLS
from polypy.ir import SCALAR_TYPES
from polypy.ir.mathfns import MATH_FUNCTIONS

INT_TYPES = ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")


def wrap(value: int, name: str) -> int:
    bits = SCALAR_TYPES[name].bits
    value &= (1 << bits) - 1
    if name.startswith("i") and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def int_samples(name: str, count: int, rng: np.random.Generator, nonzero: bool = False) -> np.ndarray:
    info = np.iinfo(SCALAR_TYPES[name].dtype)
    special = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, info.min + 1 if info.min < 0 else info.max - 1, 7]
    values = rng.integers(info.min, info.max, count, dtype=SCALAR_TYPES[name].dtype, endpoint=True)
    values[: len(special)] = np.array(special, dtype=object).astype(SCALAR_TYPES[name].dtype)
    small = rng.integers(-20 if info.min < 0 else 0, 20, count // 4)
    values[len(special): len(special) + len(small)] = small
    if nonzero:
        values[values == 0] = 3
    return values


def run_binary(op_text: str, ty: str, a: np.ndarray, b: np.ndarray, out_ty: str | None = None,
               b_ty: str | None = None) -> np.ndarray:
    out_ty = out_ty or ty
    k = kernel(f"""
        kernel k(n: i32, a: const {ty}*, b: const {b_ty or ty}*, out: {out_ty}*) {{
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {{
            out[i] = {op_text}
          }}
        }}
    """)
    out = np.zeros(len(a), dtype=SCALAR_TYPES[out_ty].dtype)
    emulate(k, (len(a) + 63) // 64, 64, {"n": len(a), "a": a, "b": b, "out": out})
    return out


# --------------------------------------------------------------------------- integers


@pytest.mark.parametrize("ty", INT_TYPES)
def test_integer_arithmetic_wraps_and_truncates(ty):
    rng = np.random.default_rng(7)
    a = int_samples(ty, 200, rng)
    b = int_samples(ty, 200, np.random.default_rng(8), nonzero=True)
    pa, pb = [int(v) for v in a], [int(v) for v in b]
    cases = {
        "a[i] + b[i]": lambda x, y: x + y,
        "a[i] - b[i]": lambda x, y: x - y,
        "a[i] * b[i]": lambda x, y: x * y,
        "a[i] / b[i]": c_div,
        "a[i] % b[i]": lambda x, y: x - c_div(x, y) * y,
        "a[i] & b[i]": lambda x, y: x & y,
        "a[i] | b[i]": lambda x, y: x | y,
        "a[i] ^ b[i]": lambda x, y: x ^ y,
        "-a[i]": lambda x, y: -x,
        "~a[i]": lambda x, y: ~x,
    }
    for text, ref in cases.items():
        got = run_binary(text, ty, a, b)
        expected = [wrap(ref(x, y), ty) for x, y in zip(pa, pb)]
        assert [int(v) for v in got] == expected, text


@pytest.mark.parametrize("ty", INT_TYPES)
def test_integer_comparisons(ty):
    a = int_samples(ty, 100, np.random.default_rng(1))
    b = np.concatenate([a[:50], int_samples(ty, 50, np.random.default_rng(2))])
    for sym, ref in (("<", np.less), ("<=", np.less_equal), (">", np.greater), (">=", np.greater_equal),
                     ("==", np.equal), ("!=", np.not_equal)):
        got = run_binary(f"a[i] {sym} b[i]", ty, a, b, out_ty="bool")
        np.testing.assert_array_equal(got, ref(a.astype(object), b.astype(object)).astype(bool), err_msg=sym)


@pytest.mark.parametrize("ty", INT_TYPES)
def test_shifts_arithmetic_on_signed_logical_on_unsigned(ty):
    bits = SCALAR_TYPES[ty].bits
    a = int_samples(ty, 100, np.random.default_rng(3))
    s = np.random.default_rng(4).integers(0, bits, 100).astype(np.int32)
    left = run_binary("a[i] << b[i]", ty, a, s, b_ty="i32")
    right = run_binary("a[i] >> b[i]", ty, a, s, b_ty="i32")
    assert [int(v) for v in left] == [wrap(int(x) << int(c), ty) for x, c in zip(a, s)]
    assert [int(v) for v in right] == [int(x) >> int(c) for x, c in zip(a, s)]  # Python >> is arithmetic


def test_specific_c_integer_results():
    k = kernel("""
        kernel k(out: i64*) {
          out[0] = (i64)(-7 / 2)
          out[1] = (i64)(-7 % 2)
          out[2] = (i64)(7 % -2)
          out[3] = (i64)(0u - 1u)
          out[4] = (i64)(-16 >> 2)
          out[5] = (i64)(4294967280u >> 2u)
          out[6] = (i64)(127:i8 + 1:i8)
          out[7] = (i64)(200:u8 * 2:u8)
          out[8] = (i64)(2147483647 + 1)
          out[9] = (i64)((u16)70000)
          out[10] = (i64)((i8)(-129))
          out[11] = (i64)(-2147483648 / -1)
          out[12] = (i64)(1 << 31)
        }
    """)
    out = np.zeros(13, np.int64)
    emulate(k, 1, 1, {"out": out})
    assert out.tolist() == [-3, -1, 1, 4294967295, -4, 1073741820, -128, 144, -2147483648, 4464, 127,
                            -2147483648, -2147483648]


def test_conversions():
    k = kernel("""
        kernel k(f: const f32*, d: const f64*, i: i32*, u: u8*, b: i32*, w: f32*, q: u32*) {
          var t: u32 = threadIdx.x
          i[t] = (i32)f[t]
          u[t] = (u8)f[t]
          b[t] = (i32)((bool)f[t]) + 10 * (i32)((bool)(i32)f[t])
          w[t] = (f32)d[t]
          q[t] = (u32)(i32)f[t]
        }
    """)
    f = np.array([2.9, -2.9, 0.5, -0.5, 300.7, -5.0, np.nan, 3e9, -3e9, 0.0, 1.0, 255.99], np.float32)
    d = np.array([1 / 3, 1e40, -1e-50, 0.1, 16777217.0, 2.5, np.nan, -0.0, 1.0, 2.0, 3.0, 4.0])
    n = len(f)
    outs = {"i": np.zeros(n, np.int32), "u": np.zeros(n, np.uint8), "b": np.zeros(n, np.int32),
            "w": np.zeros(n, np.float32), "q": np.zeros(n, np.uint32)}
    emulate(k, 1, n, {"f": f, "d": d, **outs})
    # float -> int truncates toward zero; NaN and out-of-range saturate (CUDA's cvt.rzi).
    assert outs["i"].tolist() == [2, -2, 0, 0, 300, -5, 0, 2147483647, -2147483648, 0, 1, 255]
    assert outs["u"].tolist() == [2, 0, 0, 0, 255, 0, 0, 255, 0, 0, 1, 255]
    # (bool)f is f != 0 (NaN is true); (bool)(int)0.5 is false.
    assert outs["b"].tolist() == [11, 11, 1, 1, 11, 11, 1, 11, 11, 0, 11, 11]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(outs["w"], d.astype(np.float32))
    assert outs["q"].tolist() == [2, 2**32 - 2, 0, 0, 300, 2**32 - 5, 0, 2147483647, 2147483648, 0, 1, 255]


def test_f32_arithmetic_rounds_to_f32():
    a = np.array([1e8, 0.1, 16777216.0, 3.0], np.float32)
    b = np.array([1.0, 0.2, 1.0, 7.0], np.float32)
    for text, ref in (("a[i] + b[i]", a + b), ("a[i] / b[i]", a / b), ("a[i] - b[i]", a - b),
                      ("a[i] * b[i]", a * b), ("a[i] % b[i]", np.fmod(a, b))):
        np.testing.assert_array_equal(run_binary(text, "f32", a, b), ref, err_msg=text)
    np.testing.assert_array_equal(run_binary("a[i] / b[i]", "f32", a, np.zeros(4, np.float32)),
                                  np.full(4, np.inf, np.float32))


def test_errors_undefined_integer_operations():
    text = """
        kernel k(n: i32, m: i32, s: i32, out: i32*) {
          out[0] = n / m
          out[1] = n << s
        }
    """
    out = np.zeros(2, np.int32)
    expect_error(lambda: emulate(kernel(text), 1, 1, {"n": 1, "m": 0, "s": 1, "out": out}), text, "n / m",
                 "integer division by zero", "thread (0, 0, 0) of block (0, 0, 0)")
    # A shift by at least the width (undefined in C) gives what the GPU's shl gives: the count
    # clamped to the width, so 0 (Rodinia's huffman relies on it).
    for s in (32, 33, -1):
        out[:] = 7
        emulate(kernel(text), 1, 1, {"n": 3, "m": 1, "s": s, "out": out})
        assert out.tolist() == [3, 0]


# --------------------------------------------------------------------------- math functions


def test_every_math_function_has_an_implementation():
    assert set(MATH_IMPLS) == set(MATH_FUNCTIONS)


def _round_half_away(v: float) -> float:
    if not math.isfinite(v):
        return v
    whole = math.floor(abs(v))
    if abs(v) - whole >= 0.5:
        whole += 1
    return math.copysign(float(whole), v)


def _exact_fma(x: float, y: float, z: float, dtype: type) -> float:
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    guess = dtype(float(exact))
    best = None
    for cand in (np.nextafter(guess, dtype(-np.inf)), guess, np.nextafter(guess, dtype(np.inf))):
        err = abs(Fraction(float(cand)) - exact)
        key = (err, int(np.array(cand).view(np.int32 if dtype is np.float32 else np.int64)) & 1)
        if best is None or key < best[0]:
            best = (key, cand)
    return best[1]


_REFERENCE = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: 10.0 ** x, "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "cbrt": np.cbrt,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": np.vectorize(math.erf), "erfc": np.vectorize(math.erfc),
    "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    "round": np.vectorize(_round_half_away), "rint": np.rint,
    "saturate": lambda x: np.where(np.isnan(x), 0.0, np.minimum(np.maximum(x, 0.0), 1.0)),
    "pow": np.power, "atan2": np.arctan2, "fmin": np.fmin, "fmax": np.fmax, "fmod": np.vectorize(math.fmod),
    "hypot": np.hypot, "copysign": np.copysign,
    "fdim": lambda x, y: np.where(np.isnan(x) | np.isnan(y), np.nan, np.where(x > y, x - y, 0.0)),
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "signbit": np.signbit,
    "min": np.minimum, "max": np.maximum, "abs": np.abs,
}

_DOMAINS = {
    "log": (0.01, 100), "log2": (0.01, 100), "log10": (0.01, 100), "sqrt": (0, 100), "rsqrt": (0.01, 100),
    "log1p": (-0.99, 10), "asin": (-1, 1), "acos": (-1, 1), "atanh": (-0.99, 0.99), "acosh": (1, 10),
    "pow": (0.1, 10), "round": (-4, 4), "rint": (-4, 4), "saturate": (-0.5, 1.5),
}


def _inputs(name: str, arity: int, dtype: type, rng: np.random.Generator) -> list[np.ndarray]:
    lo, hi = _DOMAINS.get(name, (-5, 5))
    args = [rng.uniform(lo, hi, 257) for _ in range(arity)]
    if name == "pow":
        args[1] = rng.uniform(-3, 3, 257)
    if name in ("round", "rint"):
        args[0][:12] = [0.5, -0.5, 1.5, 2.5, -2.5, 3.5, -0.0, 0.49999997, 1e8 + 0.5, -7.5, 0.0, 4.0]
    if name in ("fmin", "fmax", "fdim", "copysign"):
        args[1][:4] = args[0][:4]
        args[0][4], args[1][5] = np.nan, np.nan
        args[0][6], args[1][7] = -0.0, -0.0
    if name in ("isnan", "isinf", "isfinite", "signbit"):
        args[0][:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, -1e-30]
    if name == "saturate":
        args[0][:2] = [np.nan, -np.inf]
    return [a.astype(dtype) for a in args]


def _run_call(name: str, ty: str, args: list[np.ndarray], out_ty: str) -> np.ndarray:
    params = ", ".join(f"x{j}: const {ty}*" for j in range(len(args)))
    call = f"{name}({', '.join(f'x{j}[i]' for j in range(len(args)))})"
    k = kernel(f"""
        kernel k(n: i32, {params}, out: {out_ty}*) {{
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {{
            out[i] = {call}
          }}
        }}
    """)
    out = np.zeros(len(args[0]), dtype=SCALAR_TYPES[out_ty].dtype)
    emulate(k, 5, 64, {"n": len(args[0]), **{f"x{j}": a for j, a in enumerate(args)}, "out": out})
    return out


@pytest.mark.parametrize("name", sorted(n for n, f in MATH_FUNCTIONS.items() if f.domain == "float" and n != "fma"))
@pytest.mark.parametrize("ty", ["f32", "f64"])
def test_math_function_against_numpy(name, ty):
    fn = MATH_FUNCTIONS[name]
    dtype = SCALAR_TYPES[ty].dtype.type
    args = _inputs(name, fn.arity, dtype, np.random.default_rng(sum(map(ord, name))))
    out_ty = "bool" if fn.returns_bool else ty
    got = _run_call(name, ty, args, out_ty)
    wide = [a.astype(np.float64) for a in args]
    with np.errstate(all="ignore"):
        expected = np.asarray(_REFERENCE[name](*wide))
    if fn.returns_bool:
        np.testing.assert_array_equal(got, expected.astype(bool))
        return
    expected = expected.astype(dtype)
    assert got.dtype == dtype
    # f32 results are the float64 result rounded once; f64 results agree with NumPy/libm.
    rtol = 2.5e-7 if ty == "f32" else 4e-16
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=0, equal_nan=True, err_msg=name)
    np.testing.assert_array_equal(np.signbit(got[got == 0]), np.signbit(expected[got == 0]), err_msg=name)


def test_math_special_values():
    x = np.array([0.5, -0.5, 2.5, -2.5, np.nan, 1.0], np.float32)
    y = np.array([np.nan, 3.0, np.nan, -1.0, 2.0, 1.0], np.float32)
    assert _run_call("round", "f32", [x], "f32").tolist()[:4] == [1.0, -1.0, 3.0, -3.0]
    assert _run_call("rint", "f32", [x], "f32").tolist()[:4] == [0.0, -0.0, 2.0, -2.0]
    assert _run_call("fmin", "f32", [x, y], "f32").tolist() == [0.5, -0.5, 2.5, -2.5, 2.0, 1.0]
    assert _run_call("fmax", "f32", [x, y], "f32").tolist() == [0.5, 3.0, 2.5, -1.0, 2.0, 1.0]
    assert _run_call("saturate", "f32", [y], "f32").tolist() == [0.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    np.testing.assert_array_equal(_run_call("fdim", "f64", [x.astype(float), y.astype(float)], "f64"),
                                  [np.nan, 0.0, np.nan, 0.0, np.nan, 0.0])
    assert _run_call("exp10", "f64", [np.array([2.0, -1.0, 0.0])], "f64").tolist() == [100.0, 0.1, 1.0]
    assert _run_call("rsqrt", "f32", [np.array([4.0, 0.0, 0.25], np.float32)], "f32").tolist() == [0.5, np.inf, 2.0]
    assert _run_call("copysign", "f32", [np.float32([1, 1, 2]), np.float32([-0.0, 0.0, -3])], "f32").tolist() == \
        [-1.0, 1.0, -2.0]


@pytest.mark.parametrize("ty", ["f32", "f64"])
def test_fma_rounds_once(ty):
    dtype = np.float32 if ty == "f32" else np.float64
    rng = np.random.default_rng(11)
    a = rng.standard_normal(300).astype(dtype)
    b = rng.standard_normal(300).astype(dtype)
    c = rng.standard_normal(300).astype(dtype)
    c[:150] = -(a[:150] * b[:150])  # catastrophic cancellation: only a single rounding gets it right
    eps = np.finfo(dtype).eps
    a[150], b[150], c[150] = 1 + eps, 1 - eps, -1  # a*b rounds to 1 but is 1 - eps**2
    got = _run_call("fma", ty, [a, b, c], ty)
    expected = [_exact_fma(float(x), float(y), float(z), dtype) for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(got, np.array(expected, dtype=dtype))
    assert got[150] == -np.float64(eps) ** 2 and (a[150] * b[150] + c[150]) == 0


@pytest.mark.parametrize("ty", ["i32", "u32", "i64", "u8"])
def test_integer_min_max_abs(ty):
    a = int_samples(ty, 100, np.random.default_rng(5))
    b = int_samples(ty, 100, np.random.default_rng(6))
    np.testing.assert_array_equal(_run_call("min", ty, [a, b], ty), np.minimum(a, b))
    np.testing.assert_array_equal(_run_call("max", ty, [a, b], ty), np.maximum(a, b))
    expected_abs = [wrap(abs(int(v)), ty) for v in a]
    assert [int(v) for v in _run_call("abs", ty, [a], ty)] == expected_abs
