"""Thread loops over accesses with run-time strides (PyTorch accessors: ``acc[n][c]`` is
``data[stride0 * n + stride1 * c]``; the LLTM backward's ``d_elu`` choice): the results are the
emulator's, with unit, large and non-unit strides. (Computing the index's 32-bit part in 64 bits
so that GCC vectorizes such loops was tried and reverted: it kept a reversed block-stride loop
from being interchanged with the thread loop, tests/test_schedule_steps.py.)"""
from __future__ import annotations


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
