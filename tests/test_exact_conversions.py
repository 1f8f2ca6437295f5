"""Float -> integer conversions that provably cannot saturate are C casts (polypy.analysis.float_ranges).

The C backend writes the GPU's saturating conversion (``polypy_cvt_*``: NaN -> 0, out of range
-> the bound) for every float -> integer conversion except where the operand's value range,
computed by ``FloatRanges``, is inside the destination's range and excludes NaN: there C's cast
is the same conversion. These tests check both the emitted C (the check omitted where proven,
kept where not) and the values (C, the emulator and LLVM against NumPy on NaN, infinities and
out-of-range inputs)."""
from __future__ import annotations

import math
import pathlib
import re

import numpy as np

import polypy
from c_support import copy_args, need_compiler, run_c, run_emulated
from polypy.analysis.float_ranges import TOP, FloatRanges, Interval
from polypy.driver.cli import main
from polypy.ir import F32, F64, I32, I64, U8, nodes as n

SOURCE = r"""
__global__ void conv(const float* x, const double* d, const int* m, int* o, unsigned char* p, long long* h, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    o[i] = (int)((float)m[i] * 0.5f);                              // proven: |m / 2| <= 2^30
    p[i] = (unsigned char)fminf(fmaxf(v, 0.0f), 255.0f);            // proven: fmaxf ignores NaN
    o[n + i] = (int)floorf((float)(i % 100) / 7.0f);                // proven
    if (v >= -1000.0f && v < 1000.0f) o[2 * n + i] = (int)(v * 3.0f);  // proven by the guard
    else o[2 * n + i] = -7;
    o[3 * n + i] = v < 100.0f ? (int)v : 0;                         // kept: v may be -inf
    o[4 * n + i] = (int)v;                                          // kept: anything
    h[i] = (long long)(d[i] * 2.0);                                 // kept
    h[n + i] = (long long)((double)m[i] * (double)m[i]);            // proven: <= 2^62
    o[5 * n + i] = (int)((double)m[i] * 2.0);                       // kept: up to 2^32
    p[n + i] = (unsigned char)fminf(v, 255.0f);                     // kept: negative, NaN
    float w = v;
    if (w >= 0.0f && w < 10.0f) { w = w * 1e10f; o[6 * n + i] = (int)w; }  // kept: w assigned in the branch
    else o[6 * n + i] = -9;
  }
}
"""

X = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 999.9, -999.9, 1000.0, 5.5, -5.5, 254.7, 300.0, 99.9, -2.5e9,
              0.0, 9.99], np.float32)
D = np.array([np.nan, 1e300, -1e300, 3.5, -4.6e18, 4.7e18, 1.0, -0.75, np.inf, -np.inf, 2.0 ** 62, -2.0 ** 62, 0.0,
              7.25, 1e10, -1e10], np.float64)
M = np.array([-2 ** 31, 2 ** 31 - 1, 0, -3, 7, 2 ** 30, -2 ** 30 - 5, 123456789, -1, 1, 99, 100, 101, 65536,
              -65536, 3], np.int32)


def _gpu(values, t) -> np.ndarray:
    """PTX's cvt.rzi: truncation, NaN -> 0, the bound out of range."""
    info = np.iinfo(t)
    out = [0 if math.isnan(v) else info.min if v <= info.min else info.max if v >= info.max + 1 else int(v)
           for v in np.asarray(values, np.float64)]
    return np.array(out, t)


def _expected(n: int) -> dict[str, np.ndarray]:
    i = np.arange(n)
    with np.errstate(all="ignore"):
        v = X
        o = np.concatenate([
            _gpu(M.astype(np.float32) * np.float32(0.5), np.int32),
            _gpu(np.floor((i % 100).astype(np.float32) / np.float32(7.0)), np.int32),
            np.where((v >= -1000) & (v < 1000), _gpu(v * np.float32(3.0), np.int32), -7),
            np.where(v < 100, _gpu(v, np.int32), 0),
            _gpu(v, np.int32),
            _gpu(M.astype(np.float64) * 2.0, np.int32),
            np.where((v >= 0) & (v < 10), _gpu(v * np.float32(1e10), np.int32), -9),
        ]).astype(np.int32)
        p = np.concatenate([_gpu(np.fmin(np.fmax(v, np.float32(0)), np.float32(255)), np.uint8),
                            _gpu(np.fmin(v, np.float32(255)), np.uint8)])
        h = np.concatenate([_gpu(D * 2.0, np.int64), _gpu(M.astype(np.float64) ** 2, np.int64)])
    return {"o": o, "p": p, "h": h}


def test_conversions_give_the_gpu_values_with_and_without_the_check(tmp_path: pathlib.Path) -> None:
    need_compiler()
    path = tmp_path / "conv.cu"
    path.write_text(SOURCE)
    n = X.size
    args = {"x": X, "d": D, "m": M, "o": np.zeros(7 * n, np.int32), "p": np.zeros(2 * n, np.uint8),
            "h": np.zeros(2 * n, np.int64), "n": np.int32(n)}
    want = _expected(n)
    kernel = polypy.load(str(path)).kernel("conv")
    llvm = copy_args(args)
    polypy.compile(str(path)).conv[2, 8](*llvm.values())
    for way, got in (("c", run_c(kernel, 2, 8, args)), ("emulator", run_emulated(kernel, 2, 8, args)), ("llvm", llvm)):
        for name, value in want.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{way}: {name}")


def test_the_check_is_omitted_where_proven_and_kept_where_not(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "conv.cu"
    path.write_text(SOURCE)
    out = tmp_path / "conv.c"
    assert main(["translate", str(path), "-o", str(out)]) == 0
    text = out.read_text()
    proven = [r"= \(int\)\(\(float\)m\[\w+\] \* 0\.5f\);",
              r"= \(unsigned char\)polypy_fminf\(polypy_fmaxf\(v\w*, 0\.0f\), 255\.0f\);",
              r"= \(int\)floorf\(",
              r"= \(int\)\(v\w* \* 3\.0f\);",
              r"= \(long long\)\(\(double\)m\[\w+\] \* \(double\)m\[\w+\]\);"]
    kept = [r"\? polypy_cvtv?_i32_f32\(v\w*\) : 0;",
            r"= polypy_cvtv?_i32_f32\(v\w*\);",
            r"= polypy_cvtv?_i64_f64\(d\[\w+\] \* 2\.0\);",
            r"= polypy_cvtv?_i32_f64\(\(double\)m\[\w+\] \* 2\.0\);",
            r"= polypy_cvtv?_u8_f32\(polypy_fminf\(v\w*, 255\.0f\)\);",
            r"= polypy_cvtv?_i32_f32\(w\w*\);"]
    for pattern in proven + kept:
        assert re.search(pattern, text), pattern
    # Only the proven ones are plain casts: no other float -> integer C cast in the kernel.
    assert not re.search(r"\(int\)\(?w\w*\b", text)
    assert not re.search(r"\(int\)v\w*\b", text)


def _v(name: str, ty=F32) -> n.Var:
    return n.Var(name, ty)


def _c(value: float, ty=F32) -> n.Const:
    return n.Const(value, ty)


def test_intervals_count_every_nan_and_infinity() -> None:
    x = _v("x")  # a parameter: anything
    ranges = FloatRanges((), ("x",))
    assert ranges.of(x) == TOP
    # fmaxf(x, 0) is never NaN (a NaN operand is ignored), fminf of that with 255 is in [0, 255].
    clamp = n.Call("fmin", (n.Call("fmax", (x, _c(0.0)), F32), _c(255.0)), F32)
    r = ranges.of(clamp)
    assert not r.nan and r.lo == 0.0 and r.hi == 255.0
    assert ranges.exact_conversion(n.Cast(U8, clamp)) and ranges.exact_conversion(n.Cast(I32, clamp))
    # fminf(x, 255) alone may be NaN (x NaN gives 255, but -inf gives -inf).
    assert not ranges.exact_conversion(n.Cast(U8, n.Call("fmin", (x, _c(255.0)), F32)))
    # An integer times 0.5 fits; times 2 (in double) does not fit i32.
    m = n.Cast(F32, _v("m", I32))
    assert ranges.exact_conversion(n.Cast(I32, n.Binary("mul", m, _c(0.5))))
    m64 = n.Cast(F64, _v("m", I32))
    assert not ranges.exact_conversion(n.Cast(I32, n.Binary("mul", m64, _c(2.0, F64))))
    assert ranges.exact_conversion(n.Cast(I64, n.Binary("mul", m64, m64)))
    # Division by a range holding 0: inf or NaN.
    assert ranges.of(n.Binary("div", _c(1.0), m)) == Interval(-math.inf, math.inf, False)
    assert ranges.of(n.Binary("div", m, m)).nan
    assert not ranges.exact_conversion(n.Cast(I32, n.Binary("div", _c(1.0), m)))
    # inf - inf and 0 * inf are NaN; sqrt of a negative too.
    s = n.Call("saturate", (x,), F32)
    assert ranges.of(s) == Interval(0.0, 1.0, False)
    big = n.Binary("mul", s, _c(math.inf))
    assert ranges.of(big).nan
    assert ranges.of(n.Call("sqrt", (n.Binary("sub", s, _c(0.5)),), F32)).nan
    assert not ranges.of(n.Call("sqrt", (s,), F32)).nan
    # A value just below 2^31 in f32 rounds up to 2^31: the bound is widened, not trusted.
    near = n.Binary("add", n.Binary("mul", s, _c(2147483520.0)), _c(127.0))
    assert not ranges.exact_conversion(n.Cast(I32, near))


def test_conditions_bound_the_values_they_compare() -> None:
    x = _v("x")
    ranges = FloatRanges((), ("x",))
    below = n.Binary("lt", x, _c(100.0))
    # x < 100 ? x : 0 may still be -inf; with a lower bound too it fits.
    assert not ranges.exact_conversion(n.Cast(I32, n.Select(below, x, _c(0.0))))
    both = n.Binary("land", n.Binary("ge", x, _c(-5.0)), below)
    assert ranges.exact_conversion(n.Cast(I32, n.Select(both, x, _c(0.0))))
    # The false side of a comparison may be NaN: !(x >= 100) is x < 100 or NaN.
    negated = n.Binary("ge", x, _c(100.0))
    assert ranges.of_under(negated, False, x).nan
    # A constant on the left mirrors the comparison: 0 < x.
    assert ranges.of_under(n.Binary("lt", _c(0.0), x), True, x).lo == 0.0


def test_locals_are_the_union_of_their_definitions() -> None:
    x = _v("x")
    y = _v("y")
    clamp = n.Call("fmin", (n.Call("fmax", (x, _c(0.0)), F32), _c(10.0)), F32)
    body = (n.Decl("y", F32, clamp),
            n.If(n.Binary("lt", x, _c(0.0)), (n.Assign("y", n.Binary("mul", y, _c(2.0))),), ()))
    ranges = FloatRanges(body, ("x",))
    # y = y * 2 refers to itself: unknown, so y is unknown.
    assert not ranges.exact_conversion(n.Cast(I32, y))
    body = (n.Decl("y", F32, clamp), n.Assign("y", _c(-3.0)), n.Decl("z", F32, None))
    ranges = FloatRanges(body, ("x",))
    assert ranges.of(y) == Interval(-3.0, 10.0, False)
    assert ranges.of(_v("z")) == Interval(0.0, 0.0, False)  # no initializer: the C backend writes 0
    # A variable written by a loop header or a parameter is unknown.
    loop = (n.For("k", F32, _c(0.0), _c(4.0), _c(1.0), ()),)
    assert FloatRanges(loop).of(_v("k")) == TOP


def test_llvm_writes_plain_conversions_only_where_proven(tmp_path: pathlib.Path) -> None:
    from codegen.llvm import emit_llvm_ir
    from polypy.driver.pipelines import lower_and_emit
    path = tmp_path / "conv.cu"
    path.write_text(r"""
__global__ void proven(const float* x, const int* m, int* o, unsigned char* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    o[i] = (int)((float)m[i] * 0.5f);
    p[i] = (unsigned char)fminf(fmaxf(v, 0.0f), 255.0f);
    if (v >= -1000.0f && v < 1000.0f) o[n + i] = (int)(v * 3.0f);
  }
}
__global__ void kept(const float* x, int* o, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; o[i] = v < 100.0f ? (int)v : 0; o[n + i] = (int)v; }
}
""")
    text = emit_llvm_ir(lower_and_emit(polypy.load(str(path)), "cpu"), optimize=False)
    proven = text[text.index('define i32 @"proven_worker"'):text.index('define i32 @"kept_blocks"')]
    kept = text[text.index('define i32 @"kept_worker"'):]
    # The saturating form (codegen.llvm.expressions.saturating) compares the operand with 2^31
    # (i32; 2^8 for u8) before it converts; a proven conversion converts the operand as it is.
    i32_up, u8_up = "0x41e0000000000000", "0x4070000000000000"
    assert "fptosi float" in proven and "fptoui float" in proven
    assert i32_up not in proven.lower() and u8_up not in proven.lower()
    assert re.search(rf"fcmp olt float %[\w.\"]+, {i32_up}", kept.lower()) and "fptosi float" in kept


def test_a_comparison_of_memory_bounds_nothing() -> None:
    # Memory may change between the comparison and the conversion (another thread's store): only
    # expressions without loads are bounded by a condition.
    load = n.Load("x", (_v("i", I32),), F32)
    ranges = FloatRanges((), ("x", "i"))
    cond = n.Binary("land", n.Binary("ge", load, _c(0.0)), n.Binary("lt", load, _c(100.0)))
    assert not ranges.exact_conversion(n.Cast(I32, n.Select(cond, load, _c(0.0))))
    x = _v("x")
    cond = n.Binary("land", n.Binary("ge", x, _c(0.0)), n.Binary("lt", x, _c(100.0)))
    assert ranges.exact_conversion(n.Cast(I32, n.Select(cond, x, _c(0.0))))


SERIAL = r"""
__global__ void serial(const float* x, const double* d, int* a, int* b, long long* c, long long* e, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    for (int j = 0; j < m; ++j) {  // a serial loop in the thread loop: the scalar forms
      int k = (i + j) % n;
      a[i * m + j] = (int)x[k]; b[i * m + j] = (int)d[k]; c[i * m + j] = (long long)x[k]; e[i * m + j] = (long long)d[k];
    }
  }
}
"""


def test_scalar_forms_at_the_edges_of_the_range(tmp_path: pathlib.Path) -> None:
    # The scalar i32/i64 forms on x86-64 test the converted value for the type's minimum (x86's
    # answer for NaN and out-of-range operands): operands that truncate to the minimum themselves
    # must still give it, those just outside must saturate.
    need_compiler()
    path = tmp_path / "serial.cu"
    path.write_text(SERIAL)
    x = np.array([-2.0 ** 31, -2.0 ** 31 - 256, 2.0 ** 31, 2.0 ** 31 - 128, -2.0 ** 63, -2.0 ** 63 * 1.0000001, 2.0 ** 63,
                  np.nan, -np.inf, np.inf, -0.9, 0.9, -1.5, 1e30, -1e30, 7.0], np.float32)
    d = np.array([-2.0 ** 31, -2.0 ** 31 - 0.5, -2.0 ** 31 - 1.0, 2.0 ** 31 - 0.5, 2.0 ** 31, -2.0 ** 63,
                  -2.0 ** 63 - 2048.0, 2.0 ** 63, 2.0 ** 63 - 1024.0, np.nan, -np.inf, np.inf, -0.999, 1e300, -1e300,
                  -7.5], np.float64)
    n, m = x.size, 2
    args = {"x": x, "d": d, "a": np.zeros(n * m, np.int32), "b": np.zeros(n * m, np.int32),
            "c": np.zeros(n * m, np.int64), "e": np.zeros(n * m, np.int64), "n": np.int32(n), "m": np.int32(m)}
    kernel = polypy.load(str(path)).kernel("serial")
    at = (np.arange(n)[:, None] + np.arange(m)[None, :]).reshape(-1) % n
    want = {"a": _gpu(x[at], np.int32), "b": _gpu(d[at], np.int32), "c": _gpu(x[at], np.int64),
            "e": _gpu(d[at], np.int64)}
    for way, got in (("c", run_c(kernel, 2, 8, args)), ("emulator", run_emulated(kernel, 2, 8, args))):
        for name, value in want.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{way}: {name}")


def test_a_single_precision_constant_is_taken_as_rounded() -> None:
    # 2147483647.0 written as a float is 2^31 (out of i32's range): the constant's interval holds
    # its rounding, so the conversion keeps its check.
    ranges = FloatRanges(())
    assert not ranges.exact_conversion(n.Cast(I32, _c(2147483647.0)))
    assert ranges.exact_conversion(n.Cast(I32, _c(2147483647.0, F64)))
    assert ranges.exact_conversion(n.Cast(I32, _c(-2147483520.0)))
