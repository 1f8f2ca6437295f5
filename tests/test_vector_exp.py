"""``exp`` written out so that loops calling it vectorize (``polypy.ir.mathfns``, ``EXPF_*`` and
``EXP_*``; the C prelude's ``polypy_expf``/``polypy_exp``, the LLVM backend's inline sequences):
accurate on arguments spread over every float and double, the special values right, the same bits
through C and LLVM, and loops calling them vectorized by GCC."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from c_support import run_c
from codegen.c.templates import prelude
from polypy.driver.source import load

EXPS = r"""
__global__ void exps(const REAL* x, REAL* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = exp(x[i]);
}
"""

F32_EDGES = (0.0, -0.0, np.inf, -np.inf, np.nan, 88.72283, 88.7229, -87.33655, -87.3366, -103.972, -103.98,
             -104.0, -104.5, 104.0, 1e-30, -1e-30, 1e-45, 3.4e38, -3.4e38)
# exp(709.782712893384) is the largest double; exp(-745.1332191019411) rounds to the smallest
# subnormal, exp(-745.14) to 0.
F64_EDGES = (0.0, -0.0, np.inf, -np.inf, np.nan, 709.78, 709.79, -708.39, -708.4, -745.1332191019411, -745.14,
             -746.0, -750.0, 746.0, 1e-300, -1e-300, 5e-324, 1.7e308, -1.7e308)


def _inputs(dtype) -> np.ndarray:
    """Bit patterns spread over every sign, exponent and NaN, a dense sweep of the range where
    the result is finite and not 0, and the edges (overflow, the last subnormals, +-0, +-inf, NaN)."""
    if dtype == np.float32:
        spread = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
        dense, edges = np.linspace(-110.0, 110.0, 1 << 18, dtype=np.float32), F32_EDGES
    else:
        spread = np.random.default_rng(3).integers(0, 1 << 63, 1 << 19, dtype=np.uint64)
        spread = (spread ^ (spread << np.uint64(1))).view(np.float64)  # both signs
        dense, edges = np.random.default_rng(4).uniform(-750.0, 750.0, 1 << 19), F64_EDGES
    return np.concatenate([spread, dense, np.array(edges, dtype)])


def _ulps(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The largest |y - exp(x)| in ulps of the correctly rounded result, where it is normal and
    where it is subnormal (finite, nonzero results; exp in extended precision)."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        exact = np.exp(x.astype(np.longdouble))
        rounded = exact.astype(y.dtype)
    keep = np.isfinite(rounded) & (rounded != 0)
    err = np.abs(y[keep].astype(np.longdouble) - exact[keep]) / np.spacing(np.abs(rounded[keep])).astype(np.longdouble)
    tiny = np.abs(rounded[keep]) < np.finfo(y.dtype).tiny
    return float(err[~tiny].max()), float(err[tiny].max()) if tiny.any() else 0.0


def _run(x: np.ndarray, backend: str) -> np.ndarray:
    real = "float" if x.dtype == np.float32 else "double"
    args = {"x": x, "y": np.zeros_like(x), "n": x.size}
    grid, block = (x.size + 255) // 256, 256
    if backend == "c":
        return run_c(load(None, text=EXPS, defines={"REAL": real}).kernel("exps"), grid, block, args)["y"]
    import polypy

    polypy.compile(None, text=EXPS, defines={"REAL": real}).exps[grid, block](**args)
    return args["y"]


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_exp_is_accurate_with_the_special_values_right(backend, dtype):
    """f32: within half an ulp (evaluated in double; all 2^32 arguments were checked once: 0.5000);
    f64: 0.57 ulp where the result is normal, 0.75 where it is subnormal (rounded twice there);
    CUDA documents 2 and 1 ulp. Overflow gives inf, underflow 0, NaN a NaN."""
    x = _inputs(dtype)
    y = _run(x, backend)
    normal, subnormal = _ulps(x, y)
    assert normal < (0.501 if dtype == np.float32 else 0.57) and subnormal < (0.501 if dtype == np.float32 else 0.76)
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = np.exp(x.astype(np.longdouble)).astype(dtype)
    assert np.all(y[np.isinf(rounded) & ~np.isnan(x)] == np.inf)
    assert np.all(y[(rounded == 0) & ~np.isnan(x)] == 0)
    assert np.all(np.isnan(y[np.isnan(x)]))
    edges = F32_EDGES if dtype == np.float32 else F64_EDGES
    edge = dict(zip(edges, y[x.size - len(edges):]))
    assert edge[0.0] == 1.0 and edge[-0.0] == 1.0 and edge[-np.inf] == 0.0 and edge[np.inf] == np.inf
    if dtype == np.float32:
        assert np.isfinite(edge[88.72283]) and edge[88.7229] == np.inf  # below and above the overflow
        assert edge[-103.972] == np.float32(1e-45) and edge[-103.98] == 0.0  # the smallest subnormal, then 0
    else:
        assert np.isfinite(edge[709.78]) and edge[709.79] == np.inf
        assert edge[-745.1332191019411] == 5e-324 and edge[-745.14] == 0.0
    # Correctly rounded but for near-halfway cases: almost every result.
    same = (y == rounded) | (np.isnan(y) & np.isnan(rounded))
    assert same.mean() > (0.9999 if dtype == np.float32 else 0.99)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_exp_gives_the_same_bits_through_c_and_llvm(dtype):
    x = _inputs(dtype)
    c, llvm = _run(x, "c"), _run(x, "llvm")
    nan = np.isnan(c)
    assert np.array_equal(nan, np.isnan(llvm))
    np.testing.assert_array_equal(c[~nan], llvm[~nan])
    assert np.array_equal(np.signbit(c[~nan]), np.signbit(llvm[~nan]))


def test_the_c_backend_writes_exp_as_the_prelude_functions():
    from polypy.driver.library import emit_kernels
    from polypy.driver.pipelines import to_cpu

    for real, name in (("float", "polypy_expf"), ("double", "polypy_exp")):
        text = emit_kernels([to_cpu(load(None, text=EXPS, defines={"REAL": real}).kernel("exps"))])
        assert f"= {name}(x[" in text and "= expf(x[" not in text and "= exp(x[" not in text


@pytest.mark.parametrize("flags", [("-mavx2", "-mfma"), ("-march=x86-64-v4",)], ids=["avx2", "avx512"])
def test_loops_calling_the_prelude_exp_vectorize(tmp_path, flags):
    """What the functions are for: GCC vectorizes a loop over each (AVX2, AVX-512), with no
    -ffast-math and no -fno-trapping-math; a loop calling libm's expf or exp stays scalar."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on this machine (-fopt-info-vec is GCC's)")
    loops = {name: f"  for (int i = 0; i < n; i++) b[i] = {name}(a[i]);"
             for name in ("polypy_expf", "expf", "polypy_exp", "exp")}
    text = prelude()
    for name, loop in loops.items():
        real = "float" if name.endswith("f") else "double"
        text += f"\nvoid f_{name}(const {real}* restrict a, {real}* restrict b, int n)\n{{\n{loop}\n}}\n"
    source = tmp_path / "loops.c"
    source.write_text(text)
    lines = text.splitlines()
    done = subprocess.run([gcc, "-std=c99", "-O3", *flags, "-fno-math-errno", "-ffp-contract=off",
                           "-fopt-info-vec-optimized", "-c", str(source), "-o", str(tmp_path / "loops.o")],
                          capture_output=True, text=True, check=True)
    vectorized = {int(line.split(":")[1]) for line in done.stderr.splitlines() if "loop vectorized" in line}
    for name, loop in loops.items():
        assert ((lines.index(loop) + 1) in vectorized) == name.startswith("polypy_"), name


@pytest.mark.parametrize("real", ["float", "double"])
def test_llvm_vectorizes_the_loop_over_exp(real):
    """The LLVM backend's inline sequence: the optimized module has no call to exp left, and
    the loop over the block's threads computes it on vectors of doubles (the f32 version works
    in double precision too)."""
    import re

    from codegen.llvm import emit_llvm_ir
    from polypy.driver.pipelines import lower_and_emit

    optimized = emit_llvm_ir(lower_and_emit(load(None, text=EXPS, defines={"REAL": real}), "cpu"), optimize=True)
    assert "@expf" not in optimized and "@exp(" not in optimized and "@llvm.exp" not in optimized
    assert re.search(r"fmul <\d+ x double>", optimized)
    assert re.search(r"@llvm\.rint\.v\d+f64", optimized)
