"""``frexp``, ``ldexp`` and ``modf`` in device code (issue 41 item 7; NVIDIA's eigenvalues sample
calls ``frexp``): float and double, on the emulator, the C and the LLVM backend, bit for bit
against NumPy's (the C library's) results, over zeros, infinities, NaN, subnormals, the largest
finite values and random values, with exponents that overflow, underflow into subnormals (one
rounding) and past them."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import run_c, run_emulated

SOURCE = """
__global__ void parts(const {T}* x, const int* k, {T}* m, int* e, {T}* l, {T}* fr, {T}* wh, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {{
    int ex;
    m[i] = frexp(x[i], &ex);
    e[i] = ex;
    l[i] = ldexp(x[i], k[i]);
    {T} w;
    fr[i] = modf(x[i], &w);
    wh[i] = w;
  }}
}}
"""


def _inputs(dtype, rng) -> tuple[np.ndarray, np.ndarray]:
    info = np.finfo(dtype)
    ut = np.uint32 if dtype == np.float32 else np.uint64
    tiny = np.array(1, ut).view(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 3.0, -2.5, 1e-3, info.max, -info.max,
                        info.tiny, -info.tiny, tiny, -tiny, 3 * tiny, info.tiny / 3, 2.0 ** 20 + 0.5, -7.75], dtype)
    bits = rng.integers(0, np.iinfo(ut).max, size=1500, dtype=ut, endpoint=True).view(dtype)
    moderate = (rng.uniform(-1e4, 1e4, size=1000)).astype(dtype)
    x = np.concatenate([np.repeat(special, 20), bits, moderate])
    span = 330 if dtype == np.float32 else 2300
    k = rng.integers(-span, span, size=x.size).astype(np.int32)
    k[: special.size * 20] = np.tile(np.array([0, 1, -1, 200, -200, 2000, -2000, 10, -10, 130, -130, -150, 23, -24,
                                               2 ** 31 - 1, -2 ** 31, 5, -5, 60, -60], np.int32), special.size)
    return x, k


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    if got.dtype.kind == "f":
        ut = np.uint32 if got.dtype == np.float32 else np.uint64
        return bool(np.all((np.isnan(got) & np.isnan(want)) | (got.view(ut) == want.view(ut))))
    return bool(np.all(got == want))


@pytest.mark.parametrize("way", ["emulator", "c", "llvm"])
@pytest.mark.parametrize("ctype", ["float", "double"])
def test_frexp_ldexp_modf_match_the_c_library(tmp_path, ctype: str, way: str) -> None:
    dtype = np.float32 if ctype == "float" else np.float64
    x, k = _inputs(dtype, np.random.default_rng(7 if ctype == "float" else 8))
    n = x.size
    src = tmp_path / "parts.cu"
    src.write_text(SOURCE.format(T=ctype))
    args = {"x": x, "k": k, "m": np.zeros(n, dtype), "e": np.zeros(n, np.int32), "l": np.zeros(n, dtype),
            "fr": np.zeros(n, dtype), "wh": np.zeros(n, dtype), "n": n}
    blocks = (n + 127) // 128
    if way == "llvm":
        out = {name: (v.copy() if isinstance(v, np.ndarray) else v) for name, v in args.items()}
        polypy.compile(str(src)).parts[blocks, 128](*out.values())
    else:
        kernel = polypy.load(str(src)).kernel("parts")
        out = (run_emulated if way == "emulator" else run_c)(kernel, blocks, 128, args)
    with np.errstate(all="ignore"):
        m, e = np.frexp(x)
        e = np.where(np.isfinite(x), e, 0).astype(np.int32)  # CUDA stores 0 for inf and NaN
        frac, whole = np.modf(x)
        want = {"m": m, "e": e, "l": np.ldexp(x, k), "fr": frac, "wh": whole}
    for name, value in want.items():
        assert _same(out[name], value.astype(out[name].dtype)), (name, [
            (float(x[i]), int(k[i]), out[name][i], value[i]) for i in range(n)
            if not _same(out[name][i:i + 1], value[i:i + 1].astype(out[name].dtype))][:3])


def test_mixed_float_double_min_max_compare_as_doubles(tmp_path) -> None:
    """CUDA's ``max(double, float)`` / ``min(float, double)`` overloads (eigenvalues calls
    ``max(MIN_ABS_INTERVAL, t1)``): the float widened, the result a double."""
    src = tmp_path / "mixed.cu"
    src.write_text("__global__ void k(double* o, const float* a, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < n) o[i] = max(1.0e-30, a[i]) + 3.0 * min(a[i], 0.25);\n}\n")
    a = np.array([-1.0, 0.1, 0.5, 2.0, 1e-31, -0.0], np.float32)
    args = {"o": np.zeros(a.size), "a": a, "n": a.size}
    wide = a.astype(np.float64)
    want = np.maximum(1e-30, wide) + 3.0 * np.minimum(wide, 0.25)
    kernel = polypy.load(str(src)).kernel("k")
    np.testing.assert_array_equal(run_emulated(kernel, 1, 32, args)["o"], want)
    np.testing.assert_array_equal(run_c(kernel, 1, 32, args)["o"], want)
