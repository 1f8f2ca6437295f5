"""Thread loops over accesses with run-time strides (PyTorch accessors: ``acc[n][c]`` is
``data[stride0 * n + stride1 * c]``): ``gpu2cpu.exact_indices`` computes the 32-bit index part in
64 bits (``stride1 * ((i64)(blockIdx.x * blockDim.x) + (i64)tx)``), so that GCC sees the access as
strided and vectorizes the loop, which it does not through ``(i32)tx`` of the unsigned counter;
the results stay those of the emulator."""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from c_support import assert_same_as_emulator
from polypy.driver.source import load

STRIDED = r"""
__global__ void act(const float* x, long sx0, long sx1, float* y, long sy0, long sy1, int state)
{
    const int n = blockIdx.y;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < state)
        y[sy0 * n + sy1 * c] = tanhf(x[sx0 * n + sx1 * c]) * 2.0f + expf(-x[sx0 * n + sx1 * c]);
}
"""


def test_the_fast_loop_indexes_in_64_bits_and_gcc_vectorizes_it(tmp_path):
    from codegen.c import emit_kernels
    from polypy.driver.pipelines import to_cpu

    text = emit_kernels([to_cpu(load(None, text=STRIDED).kernel("act"))])
    assert "sy1 * ((long long)(blockIdx.x * blockDim.x) + (long long)tx)" in text
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on this machine (-fopt-info-vec is GCC's)")
    source = tmp_path / "act.c"
    source.write_text(text)
    done = subprocess.run([gcc, "-std=gnu99", "-O3", "-march=x86-64-v3", "-fopenmp", "-fno-math-errno",
                           "-ffp-contract=off", "-fopt-info-vec-optimized", "-c", str(source), "-o",
                           str(tmp_path / "act.o")], capture_output=True, text=True, check=True)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\s*for \(unsigned int tx = 0u; tx < tx_hi;", line))
    vectorized = {int(m.group(1)) for m in re.finditer(r":(\d+):\d+: optimized: loop vectorized", done.stderr)}
    assert any(start < line <= start + 4 for line in vectorized), done.stderr


@pytest.mark.parametrize("layout", ["rows", "transposed", "every third"])
def test_strided_results_match_the_emulator(layout):
    """Unit, large and non-unit strides, a partial last block, several rows of blocks."""
    batch, state = 3, 300
    rng = np.random.default_rng(7)
    x = rng.standard_normal(batch * state * 3).astype(np.float32)
    y = np.zeros(batch * state * 3, np.float32)
    strides = {"rows": (state, 1), "transposed": (1, batch), "every third": (3 * state, 3)}[layout]
    args = {"x": x, "sx0": strides[0], "sx1": strides[1], "y": y, "sy0": strides[0], "sy1": strides[1], "state": state}
    got = assert_same_as_emulator(load(None, text=STRIDED).kernel("act"), ((state + 127) // 128, batch), 128, args,
                                  rtol=1e-6, atol=1e-7)
    n, c = np.meshgrid(np.arange(batch), np.arange(state), indexing="ij")
    at = (strides[0] * n + strides[1] * c).ravel()
    want = np.tanh(x[at].astype(np.float64)) * 2.0 + np.exp(-x[at].astype(np.float64))
    np.testing.assert_allclose(got["y"][at], want, rtol=1e-6)
    untouched = np.ones(y.size, bool)
    untouched[at] = False
    assert np.all(got["y"][untouched] == 0.0)


# The classic LLTM's forward kernel on seven strided arrays (github.com/pytorch/extension-cpp),
# written again from its formulas: GCC needs 30 run-time overlap checks to vectorize its loop.
CELL = r"""
__device__ __forceinline__ float sigmoid(float z) { return 1.0 / (1.0 + exp(-z)); }
__global__ void cell(const float* gates, long g0, long g1, long g2, const float* old, long c0, long c1,
                     float* new_h, long h0, long h1, float* new_cell, long n0, long n1, float* ig, long i0, long i1,
                     float* og, long o0, long o1, float* cand, long d0, long d1, int state)
{
    const int n = blockIdx.y;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < state) {
        ig[i0 * n + i1 * c] = sigmoid(gates[g0 * n + g2 * c]);
        og[o0 * n + o1 * c] = sigmoid(gates[g0 * n + g1 + g2 * c]);
        cand[d0 * n + d1 * c] = fmaxf(0.0, gates[g0 * n + 2 * g1 + g2 * c]);
        new_cell[n0 * n + n1 * c] = old[c0 * n + c1 * c] + cand[d0 * n + d1 * c] * ig[i0 * n + i1 * c];
        new_h[h0 * n + h1 * c] = tanh(new_cell[n0 * n + n1 * c]) * og[o0 * n + o1 * c];
    }
}
"""


def test_polypy_torch_lets_gcc_make_the_overlap_checks_such_a_loop_needs(tmp_path):
    """``polypy.torch``'s GCC flag (``GCC_CFLAGS``): with it GCC vectorizes the LLTM cell's thread
    loop behind its run-time overlap checks; with GCC's default limit (10 checks) it does not."""
    from codegen.c import emit_kernels
    from polypy.driver.pipelines import to_cpu
    from polypy.torch_ext import GCC_CFLAGS

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on this machine (-fopt-info-vec is GCC's)")
    text = emit_kernels([to_cpu(load(None, text=CELL).kernel("cell"))])
    source = tmp_path / "cell.c"
    source.write_text(text)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\s*for \(unsigned int tx = 0u; tx < tx_hi;", line))

    def vectorized(*flags: str) -> bool:
        done = subprocess.run([gcc, "-std=gnu99", "-O3", "-march=x86-64-v3", "-fopenmp", "-fno-math-errno",
                               "-ffp-contract=off", *flags, "-fopt-info-vec-optimized", "-c", str(source), "-o",
                               str(tmp_path / "cell.o")], capture_output=True, text=True, check=True)
        done_lines = {int(m.group(1)) for m in re.finditer(r":(\d+):\d+: optimized: loop vectorized", done.stderr)}
        return any(start < line <= start + 4 for line in done_lines)

    assert vectorized(*GCC_CFLAGS)
    assert not vectorized()
