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
    # The source's `c` computed once in 64 bits (a binding), the strided index reading it.
    assert "const long long c = (long long)(blockIdx.x * blockDim.x) + (long long)tx;" in text
    assert "sy1 * c]" in text
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


# Its backward kernel: nine strided arrays, and d_elu's choice `e - 1 < 0 ? e : 0` between floats.
BACKWARD = r"""
__device__ __forceinline__ float sigmoid(float z) { return 1.0 / (1.0 + exp(-z)); }
__device__ __forceinline__ float d_sigmoid(float z) { const auto s = sigmoid(z); return (1.0 - s) * s; }
__device__ __forceinline__ float d_tanh(float z) { const auto t = tanh(z); return 1 - (t * t); }
__device__ __forceinline__ float d_elu(float z) {
    const auto e = exp(z);
    const auto d_relu = z < 0.0 ? 0.0 : 1.0;
    return d_relu + (((e - 1.0) < 0.0) ? e : 0.0);
}
__global__ void backward(float* d_old, long a0, long a1, float* d_gates, long b0, long b1, long b2,
                         const float* grad_h, long c0, long c1, const float* grad_cell, long e0, long e1,
                         const float* new_cell, long f0, long f1, const float* ig, long g0, long g1,
                         const float* og, long h0, long h1, const float* cand, long i0, long i1,
                         const float* gates, long j0, long j1, long j2, int state)
{
    const int n = blockIdx.y;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < state) {
        const auto d_output_gate = tanh(new_cell[f0 * n + f1 * c]) * grad_h[c0 * n + c1 * c];
        const auto d_tanh_new_cell = og[h0 * n + h1 * c] * grad_h[c0 * n + c1 * c];
        const auto d_new_cell = d_tanh(new_cell[f0 * n + f1 * c]) * d_tanh_new_cell + grad_cell[e0 * n + e1 * c];
        d_old[a0 * n + a1 * c] = d_new_cell;
        d_gates[b0 * n + b2 * c] = cand[i0 * n + i1 * c] * d_new_cell * d_sigmoid(gates[j0 * n + j2 * c]);
        d_gates[b0 * n + b1 + b2 * c] = d_output_gate * d_sigmoid(gates[j0 * n + j1 + j2 * c]);
        d_gates[b0 * n + 2 * b1 + b2 * c] = ig[g0 * n + g1 * c] * d_new_cell * d_elu(gates[j0 * n + 2 * j1 + j2 * c]);
    }
}
"""


def test_polypy_torch_lets_gcc_vectorize_the_lltm_backward(tmp_path):
    """With ``polypy.torch``'s flags (no floating-point traps, as in CUDA; more overlap checks) GCC
    vectorizes the LLTM backward's thread loop; without -fno-trapping-math the choice in d_elu
    stays a branch and the loop scalar."""
    from codegen.c import emit_kernels
    from polypy.driver.pipelines import to_cpu
    from polypy.torch_ext import CFLAGS, GCC_CFLAGS

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on this machine (-fopt-info-vec is GCC's)")
    assert "-fno-trapping-math" in CFLAGS
    text = emit_kernels([to_cpu(load(None, text=BACKWARD).kernel("backward"))])
    source = tmp_path / "backward.c"
    source.write_text(text)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\s*for \(unsigned int tx = 0u; tx < tx_hi;", line))

    def vectorized(*flags: str) -> bool:
        done = subprocess.run([gcc, "-std=gnu99", "-O3", "-march=x86-64-v3", "-fopenmp", "-fno-math-errno",
                               "-ffp-contract=off", *flags, "-fopt-info-vec-optimized", "-c", str(source), "-o",
                               str(tmp_path / "backward.o")], capture_output=True, text=True, check=True)
        done_lines = {int(m.group(1)) for m in re.finditer(r":(\d+):\d+: optimized: loop vectorized", done.stderr)}
        return any(start < line <= start + 4 for line in done_lines)

    assert vectorized("-fno-trapping-math", *GCC_CFLAGS)
    assert not vectorized(*GCC_CFLAGS)


@pytest.mark.parametrize("layout", ["rows", "every second"])
def test_the_lltm_backward_matches_the_emulator(layout):
    """The same kernel through the C backend and the emulator, with strides, gates where exp is
    near 1 and both arms of d_elu's choice."""
    batch, state = 2, 200
    rng = np.random.default_rng(11)
    step = 1 if layout == "rows" else 2
    arrays = {name: rng.standard_normal(batch * state * 3 * step).astype(np.float32)
              for name in ("grad_h", "grad_cell", "new_cell", "ig", "og", "cand", "gates")}
    arrays["gates"][:6] = (0.0, -0.0, 1e-8, -1e-8, 30.0, -30.0)
    args: dict = {"d_old": np.zeros(batch * state * step, np.float32), "a0": state * step, "a1": step,
                  "d_gates": np.zeros(batch * 3 * state * step, np.float32), "b0": 3 * state * step,
                  "b1": state * step, "b2": step}
    two = {"grad_h": "c", "grad_cell": "e", "new_cell": "f", "ig": "g", "og": "h", "cand": "i"}
    for name, letter in two.items():
        args[name] = arrays[name]
        args[f"{letter}0"], args[f"{letter}1"] = state * step, step
    args.update({"gates": arrays["gates"], "j0": 3 * state * step, "j1": state * step, "j2": step, "state": state})
    assert_same_as_emulator(load(None, text=BACKWARD).kernel("backward"), ((state + 127) // 128, batch), 128, args,
                            rtol=1e-6, atol=1e-6)
