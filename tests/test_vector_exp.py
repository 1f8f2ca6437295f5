"""f32 ``exp`` written out so that loops calling it vectorize (``polypy.ir.mathfns``, ``EXPF_*``;
the C prelude's ``polypy_expf``, the LLVM backend's inline sequence): accurate to half an ulp on
inputs spread over every float, the special values right, the same bits through C and LLVM, and
a loop calling it vectorized by GCC."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from c_support import run_c
from codegen.c.templates import prelude
from polypy.driver.source import load

EXPS = r"""
__global__ void exps(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = expf(x[i]);
}
"""

FLT_MAX = np.finfo(np.float32).max


def _inputs() -> np.ndarray:
    """Every 4099th bit pattern (all signs, exponents, NaNs), a dense sweep of [-110, 110] and the
    edges: overflow near 88.72, the last subnormals near -103.97, +-0, +-inf, NaN."""
    spread = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    dense = np.linspace(-110.0, 110.0, 1 << 18, dtype=np.float32)
    return np.concatenate([spread, dense, np.array(EDGES, np.float32)])


EDGES = (0.0, -0.0, np.inf, -np.inf, np.nan, 88.72283, 88.722839, 88.7229, -87.33655, -87.3366, -103.972, -103.98,
         -104.0, -104.5, 104.0, 1e-30, -1e-30, 1e-45, FLT_MAX, -FLT_MAX)


def _ulps(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|y - exp(x)| in units of the float ulp at the correctly rounded result (finite results)."""
    with np.errstate(over="ignore", invalid="ignore"):
        exact = np.exp(x.astype(np.float64))
        rounded = exact.astype(np.float32)
    finite = np.isfinite(rounded)
    ulp = np.spacing(np.abs(rounded[finite])).astype(np.float64)
    return np.abs(y[finite].astype(np.float64) - exact[finite]) / ulp


def _run(x: np.ndarray, backend: str) -> np.ndarray:
    module = load(None, text=EXPS) if backend == "c" else None
    args = {"x": x, "y": np.zeros_like(x), "n": x.size}
    grid, block = (x.size + 255) // 256, 256
    if backend == "c":
        return run_c(module.kernel("exps"), grid, block, args)["y"]
    import polypy

    out = dict(args, y=np.zeros_like(x))
    polypy.compile(None, text=EXPS).exps[grid, block](**out)
    return out["y"]


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_f32_exp_is_within_half_an_ulp_with_the_special_values_right(backend):
    x = _inputs()
    y = _run(x, backend)
    assert _ulps(x, y).max() < 0.501
    with np.errstate(over="ignore", invalid="ignore"):
        overflows = np.isinf(np.exp(x.astype(np.float64)).astype(np.float32)) & ~np.isnan(x)
    assert np.all(y[overflows] == np.inf)
    assert np.all(np.isnan(y[np.isnan(x)]))
    edge = dict(zip(EDGES, y[x.size - len(EDGES):]))
    assert edge[0.0] == 1.0 and edge[-np.inf] == 0.0 and edge[np.inf] == np.inf
    assert np.isfinite(edge[88.72283]) and edge[88.7229] == np.inf  # below and above the overflow
    # exp(-103.972) is just above 2^-150: rounds to the smallest subnormal; exp(-103.98) to 0.
    assert edge[-103.972] == np.float32(1e-45) and edge[-103.98] == 0.0
    # Correctly rounded but for near-halfway cases (as glibc's expf): almost every result.
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = np.exp(x.astype(np.float64)).astype(np.float32)
    same = (y == rounded) | (np.isnan(y) & np.isnan(rounded))
    assert same.mean() > 0.9999


def test_f32_exp_gives_the_same_bits_through_c_and_llvm():
    x = _inputs()
    c, llvm = _run(x, "c"), _run(x, "llvm")
    nan = np.isnan(c)
    assert np.array_equal(nan, np.isnan(llvm))
    np.testing.assert_array_equal(c[~nan].view(np.uint32), llvm[~nan].view(np.uint32))


def test_the_c_backend_writes_f32_exp_as_the_prelude_function():
    from codegen.c import emit_kernels
    from polypy.driver.pipelines import to_cpu

    text = emit_kernels([to_cpu(load(None, text=EXPS).kernel("exps"))])
    assert "polypy_expf(x[" in text and " expf(" not in text


def test_a_loop_calling_the_prelude_exp_vectorizes(tmp_path):
    """What the function is for: GCC vectorizes a loop over it (AVX2), with no -ffast-math and no
    -fno-trapping-math; a call to libm's expf stays scalar."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on this machine (-fopt-info-vec is GCC's)")
    source = tmp_path / "loop.c"
    source.write_text(prelude() + "\nvoid f(const float* restrict a, float* restrict b, int n)\n{\n"
                      "  for (int i = 0; i < n; i++) b[i] = polypy_expf(a[i]);\n}\n"
                      "void g(const float* restrict a, float* restrict b, int n)\n{\n"
                      "  for (int i = 0; i < n; i++) b[i] = expf(a[i]);\n}\n")
    lines = source.read_text().splitlines()
    f_loop = lines.index("  for (int i = 0; i < n; i++) b[i] = polypy_expf(a[i]);") + 1
    g_loop = lines.index("  for (int i = 0; i < n; i++) b[i] = expf(a[i]);") + 1
    done = subprocess.run([gcc, "-std=c99", "-O3", "-mavx2", "-mfma", "-fno-math-errno", "-ffp-contract=off",
                           "-fopt-info-vec-optimized", "-c", str(source), "-o", str(tmp_path / "loop.o")],
                          capture_output=True, text=True, check=True)
    vectorized = {int(line.split(":")[1]) for line in done.stderr.splitlines() if "loop vectorized" in line}
    assert f_loop in vectorized
    assert g_loop not in vectorized
