"""Loops that carry a running value (issue 38 item 3): an online softmax keeps a running maximum
and a rescaled running sum over a row whose length is an argument. Replaying such a loop from
its entry in each reversed iteration is quadratic in the row length; the gradient tapes the
carried registers in a tape sized at launch instead, says so in the report, and stays exact:
checked against finite differences (float64, emulator) on several launch shapes, and against
the replaying form, which computes the same values in the same order (bit for bit)."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from autodiff import Caching
from autodiff.check import check_gradients
from polypy.driver.gradients import grad_kernel
from polypy.emulator import emulate
from polypy.ir import nodes as n

ONLINE_SOFTMAX = r"""
__global__ void online_softmax(int rows, int cols, const double* x, double* y)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    double m = -1e300;
    double s = 0.0;
    for (int c = 0; c < cols; c++) {
        double v = x[r * cols + c];
        double mn = fmax(m, v);
        s = s * exp(m - mn) + exp(v - mn);
        m = mn;
    }
    for (int c = 0; c < cols; c++)
        y[r * cols + c] = exp(x[r * cols + c] - m) / s;
}
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    src = tmp_path_factory.mktemp("softmax") / "online_softmax.cu"
    src.write_text(ONLINE_SOFTMAX)
    return polypy.load(str(src))


def test_running_registers_are_taped_not_replayed(module) -> None:
    report: list = []
    g = grad_kernel(module, "online_softmax", report=report)
    caching = [d for d in report if isinstance(d, Caching)]
    assert not any(d.strategy == "replay-loop" for d in caching), [d.format() for d in caching]
    chosen = [d for d in caching if "instead of replaying the loop" in d.detail]
    assert {d.value for d in chosen} == {"m", "s"}, [d.format() for d in caching]
    tapes = [b for b in g.buffers if b.space == "local"]
    assert tapes and all(any(not isinstance(e, n.Const) for e in b.shape or ()) for b in tapes)
    replay: list = []
    grad_kernel(module, "online_softmax", report=replay, runtime_tapes=False)
    assert {d.value for d in replay if isinstance(d, Caching) and d.strategy == "replay-loop"} == {"m", "s"}


@pytest.mark.parametrize("grid,block,rows,cols", [(1, 32, 5, 7), (3, 8, 20, 13), (2, 16, 17, 1), (4, 4, 16, 40)])
def test_online_softmax_gradient_matches_finite_differences(module, grid, block, rows, cols) -> None:
    k = module.kernel("online_softmax")
    g = grad_kernel(module, "online_softmax")
    rng = np.random.default_rng(rows * cols)
    args = {"rows": rows, "cols": cols, "x": rng.standard_normal(rows * cols) * 3, "y": np.zeros(rows * cols)}
    result = check_gradients(k, g, (grid,), (block,), args)
    assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result


def test_taped_and_replayed_gradients_agree_bit_for_bit(module) -> None:
    rows, cols = 12, 9
    rng = np.random.default_rng(3)
    x, seed = rng.standard_normal(rows * cols), rng.standard_normal(rows * cols)
    out = []
    for options in ({}, {"runtime_tapes": False}):
        g = grad_kernel(module, "online_softmax", **options)
        args = {"rows": rows, "cols": cols, "x": x.copy(), "d_x": np.zeros_like(x), "y": np.zeros_like(x),
                "d_y": seed.copy()}
        emulate(g, (3,), (4,), args)
        out.append(args["d_x"])
    assert np.array_equal(out[0], out[1]) and np.count_nonzero(out[0]) == rows * cols
