"""f64 ``tanh`` written out so that loops calling it vectorize (``polypy.ir.mathfns``, ``TANH_*``;
the C prelude's ``polypy_tanh``, the LLVM backend's inline sequence): within 0.52 ulp of the
extended-precision value on arguments spread over every double, the special values right, the
same bits through C and LLVM, and a loop over it vectorized by GCC and LLVM where libm's tanh
stays a scalar call."""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from c_support import run_c
from codegen.c.templates import prelude
from polypy.driver.source import load

TANHS = r"""
__global__ void tanhs(const double* x, double* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = tanh(x[i]);
}
"""

# tanh is 1 (in double) from 19.06 on; the clamp is at 22; tiny arguments come back unchanged.
EDGES = (0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 19.0, 19.1, 21.99, 22.0, 22.5, -22.5, 5e-324, -5e-324,
         2.2250738585072014e-308, -1e-310, 1e-20, 1.5e-8, 0.0108, 0.0109, 0.55, 1.7e308, -1.7e308)


def _inputs() -> np.ndarray:
    """Bit patterns spread over every sign, exponent and NaN, a dense sweep of the range where the
    result is not +-1 or the argument itself (where the reduction's table index and exponent
    change), small arguments on a log scale, and the edges."""
    rng = np.random.default_rng(64)
    spread = rng.integers(0, 1 << 64, 1 << 16, dtype=np.uint64).view(np.float64)
    dense = np.concatenate([np.linspace(-22.0, 22.0, 1 << 17), rng.uniform(-1.0, 1.0, 1 << 16)])
    small = np.geomspace(1e-300, 1.0, 1 << 15)
    return np.concatenate([spread, dense, small, -small, np.array(EDGES)])


def _ulps(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|y - tanh(x)| in ulps of the exact value's binade (tanh in x87 extended precision), where
    the correctly rounded result is nonzero."""
    with np.errstate(invalid="ignore", under="ignore"):
        exact = np.tanh(x.astype(np.longdouble))
        keep = np.isfinite(x) & (exact.astype(np.float64) != 0)
        exponent = np.frexp(exact[keep].astype(np.float64))[1] - 1
        ulp = np.ldexp(1.0, np.maximum(exponent, -1022) - 52).astype(np.longdouble)
        return np.abs(y[keep].astype(np.longdouble) - exact[keep]) / ulp


def _run(x: np.ndarray, backend: str) -> np.ndarray:
    args = {"x": x, "y": np.zeros_like(x), "n": x.size}
    grid, block = (x.size + 255) // 256, 256
    if backend == "c":
        return run_c(load(None, text=TANHS).kernel("tanhs"), grid, block, args)["y"]
    import polypy

    polypy.compile(None, text=TANHS).tanhs[grid, block](**args)
    return args["y"]


@pytest.fixture(scope="module")
def results():
    x = _inputs()
    return x, {backend: _run(x, backend) for backend in ("c", "llvm")}


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_tanh_is_accurate_with_the_special_values_right(results, backend):
    """Within 0.52 ulp (10^8 arguments were checked by ``python -m bench.math_exhaustive tanh``:
    at most 0.516; glibc's tanh 2.17, CUDA documents 1). +-inf gives +-1, -0 stays -0, tiny
    arguments and subnormals come back unchanged, NaN gives a NaN."""
    x, out = results
    y = out[backend]
    assert _ulps(x, y).max() < 0.52
    tail = dict(zip(range(len(EDGES)), y[x.size - len(EDGES):]))
    assert tail[2] == 1.0 and tail[3] == -1.0 and np.isnan(tail[4]) and np.isnan(tail[5])
    assert tail[0] == 0.0 and not np.signbit(tail[0]) and tail[1] == 0.0 and np.signbit(tail[1])
    assert tail[6] == np.nextafter(1.0, 0.0)  # 1 - 6.3e-17, nearer 1 - 2^-53 than 1 (glibc gives 1)
    assert tail[7] == tail[8] == tail[9] == tail[10] == 1.0 and tail[11] == -1.0
    assert tail[len(EDGES) - 2] == 1.0 and tail[len(EDGES) - 1] == -1.0
    for i in (12, 13, 14, 15, 16):  # subnormals, the smallest normal, 1e-20: tanh(x) rounds to x
        assert tail[i] == EDGES[i] and np.signbit(tail[i]) == np.signbit(EDGES[i])
    assert np.all(np.isnan(y[np.isnan(x)]))
    assert np.array_equal(np.signbit(y[~np.isnan(x)]), np.signbit(x[~np.isnan(x)]))


def test_tanh_gives_the_same_bits_through_c_and_llvm(results):
    _, out = results
    c, llvm = out["c"], out["llvm"]
    nan = np.isnan(c)
    assert np.array_equal(nan, np.isnan(llvm))
    assert np.array_equal(c[~nan].view(np.uint64), llvm[~nan].view(np.uint64))


def test_the_c_backend_writes_tanh_as_the_prelude_function():
    from codegen.c import emit_kernels
    from polypy.driver.pipelines import to_cpu

    text = emit_kernels([to_cpu(load(None, text=TANHS).kernel("tanhs"))])
    assert "= polypy_tanh(x[" in text and "= tanh(x[" not in text


def test_a_loop_calling_the_prelude_tanh_vectorizes(tmp_path):
    """GCC (AVX2, no -ffast-math) vectorizes a loop over ``polypy_tanh``, not one over libm's."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on this machine (-fopt-info-vec is GCC's)")
    loops = {name: f"  for (int i = 0; i < n; i++) b[i] = {name}(a[i]);" for name in ("polypy_tanh", "tanh")}
    text = prelude()
    for name, loop in loops.items():
        text += f"\nvoid f_{name}(const double* restrict a, double* restrict b, int n)\n{{\n{loop}\n}}\n"
    source = tmp_path / "loops.c"
    source.write_text(text)
    lines = text.splitlines()
    done = subprocess.run([gcc, "-std=c99", "-O3", "-mavx2", "-mfma", "-fno-math-errno", "-ffp-contract=off",
                           "-fopt-info-vec-optimized", "-c", str(source), "-o", str(tmp_path / "loops.o")],
                          capture_output=True, text=True, check=True)
    vectorized = {int(line.split(":")[1]) for line in done.stderr.splitlines() if "loop vectorized" in line}
    for name, loop in loops.items():
        assert ((lines.index(loop) + 1) in vectorized) == name.startswith("polypy_"), name


def test_llvm_vectorizes_the_loop_over_tanh():
    """The LLVM backend's inline sequence: no call of libm's tanh left, the quotient on vectors."""
    from codegen.llvm import emit_llvm_ir
    from polypy.driver.pipelines import lower_and_emit

    optimized = emit_llvm_ir(lower_and_emit(load(None, text=TANHS), "cpu"), optimize=True)
    assert "@tanh(" not in optimized
    assert re.search(r"fdiv <\d+ x double>", optimized)
