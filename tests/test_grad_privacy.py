"""Adjoint writes that need no atomics (issue 12): privacy proved under parameters.

* strided loops (``for c = tid; c < cols; c += blockDim.x``): the loop variable is a dimension of
  the model and the pairwise fact "``c - tid`` is a multiple of ``blockDim.x``" proves each
  element of a row private to one thread (``polypy.poly.instances.Stride``); a row offset
  ``blockIdx.x * cols`` keeps blocks apart (``Model.block_factors``);
* versioning: ``x[i * LD + j]`` with ``j < cols`` is private exactly when ``cols <= LD``; isl
  computes that condition, the gradient tests it once per launch and uses plain ``+=`` when it
  holds, atomics otherwise -- both versions are checked against finite differences;
* a failure of the polyhedral model inside ``grad`` is an internal error, never a silent "not
  proved, use atomics".

Every check runs in the emulator (float64, central differences along random directions).
"""
from __future__ import annotations

import numpy as np
import pytest

from autodiff import Accumulation
from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.visitor import walk
from test_grad_semantics import check, grad

ROWS = """kernel rows(cols: i32, x: const f64*, y: f64*) {
  var base: i32 = (i32)blockIdx.x * cols
  for c: i32 = (i32)threadIdx.x to cols step (i32)blockDim.x {
    y[base + c] = x[base + c] * x[base + c]
  }
  for c2: i32 = (i32)threadIdx.x to cols step (i32)blockDim.x {
    y[base + c2] = y[base + c2] + 3.0 * x[base + c2]
  }
}
"""

# x is read with a fixed row stride LD = 16 while the columns run to the argument cols: rows
# overlap when cols > 16, so the elements are private to a thread exactly when cols <= 16.
PITCHED = """kernel pitched(rows: i32, cols: i32, x: const f64*, out: f64*) {
  var j: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  var i: i32 = (i32)(blockIdx.y * blockDim.y + threadIdx.y)
  if (i < rows && j < cols) {
    out[i * cols + j] = x[i * 16 + j] * x[i * 16 + j] + x[i * 16 + j]
  }
}
"""


def decisions(report, buffer: str) -> list[Accumulation]:
    return [d for d in report if isinstance(d, Accumulation) and d.buffer == buffer]


def atomics_into(g: n.Kernel, buffer: str) -> int:
    return sum(1 for s in walk(g) if isinstance(s, n.AtomicRMW) and s.buffer == buffer)


def test_strided_loop_elements_are_private_and_need_no_atomic() -> None:
    _, g, report = grad(ROWS)
    got = decisions(report, "x")
    assert got and all(d.strategy == "plain" for d in got), [d.format() for d in got]
    assert atomics_into(g, "d_x") == 0 and atomics_into(g, "d_y") == 0
    # without the proof the same adjoints are atomics (what the old model gave)
    _, g_atomic, report_atomic = grad(ROWS, privacy=False)
    assert {d.strategy for d in decisions(report_atomic, "x")} == {"atomic"}
    assert atomics_into(g_atomic, "d_x") > 0


@pytest.mark.parametrize("block", [8, 32, 64])
def test_strided_loop_gradient_matches_finite_differences(block: int) -> None:
    rng = np.random.default_rng(block)
    rows, cols = 3, 37
    args = {"cols": cols, "x": rng.standard_normal(rows * cols), "y": np.zeros(rows * cols)}
    check(ROWS, rows, block, args)


def test_versioned_adjoint_names_its_condition() -> None:
    _, g, report = grad(PITCHED)
    got = decisions(report, "x")
    assert got and {d.strategy for d in got} == {"versioned"}, [d.format() for d in got]
    assert "cols <= 16" in got[0].reason
    flags = [s for s in g.body if isinstance(s, n.Decl) and s.name.startswith("x_private")]
    assert len(flags) == 1 and format_expr(flags[0].init) == "(i64)cols <= 16l"
    # both versions are there, chosen by the flag: a plain store into d_x, and otherwise the
    # block window of x (atomics into shared memory, or into d_x when the window is too small)
    versioned = [s for s in walk(g) if isinstance(s, n.If) and isinstance(s.cond, n.Var)
                 and s.cond.name == flags[0].name]
    assert versioned
    for s in versioned:
        assert isinstance(s.then[0], n.Store) and s.then[0].buffer == "d_x"
        other = {x.buffer for y in s.orelse for x in walk(y) if isinstance(x, n.AtomicRMW)}
        assert other and other <= {"d_x"} | {x.name for x in g.buffers if x.name.startswith("win_x")}
    assert {d.strategy for d in decisions(report, "out")} <= {"plain"}


@pytest.mark.parametrize("cols", [16, 12, 23])  # private (cols <= 16) and overlapping rows (23)
def test_versioned_gradient_matches_finite_differences_in_both_versions(cols: int) -> None:
    rng = np.random.default_rng(cols)
    rows = 5
    args = {"rows": rows, "cols": cols, "x": rng.standard_normal(rows * 16 + cols),
            "out": np.zeros(rows * cols)}
    check(PITCHED, ((cols + 7) // 8, (rows + 1) // 2), (8, 2), args)


def test_model_failure_in_grad_is_an_internal_error(monkeypatch) -> None:
    import polypy.poly

    def broken(*args, **kwargs):
        raise TypeError("isl.Val cannot hold 18446744073709551615")

    monkeypatch.setattr(polypy.poly, "sharing", broken)
    with pytest.raises(InternalError, match="privacy proof of 'x'.*TypeError"):
        grad(ROWS)


SIZE_T = """#include <stddef.h>
__global__ void rows_sz(const double* x, double* y, size_t cols)
{
    for (size_t c = threadIdx.x; c < cols; c += blockDim.x)
        y[blockIdx.x * cols + c] = 2.0 * x[blockIdx.x * cols + c] * x[blockIdx.x * cols + c];
}

__global__ void grid_stride(const double* x, double* y, size_t n)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
        y[i] = x[i] * x[i] - x[i];
}
"""


def cuda_grad(tmp_path, kernel: str):
    import polypy
    from polypy.driver.gradients import grad_kernel

    src = tmp_path / "size_t.cu"
    src.write_text(SIZE_T)
    module = polypy.load(str(src))
    report: list = []
    return module.kernel(kernel), grad_kernel(module, kernel, report=report), report


def check_cuda(k, g, grid, block, args) -> None:
    from autodiff.check import check_gradients

    result = check_gradients(k, g, grid, block, args)
    assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result


def test_size_t_loop_gradient_has_no_model_failure(tmp_path) -> None:
    # u64 constants (2**64 - 1, the modulus 2**64) reached isl.Val as C longs: a TypeError that
    # grad used to swallow ("model failed"), falling back to atomics without a word
    k, g, report = cuda_grad(tmp_path, "rows_sz")
    assert decisions(report, "x") and not any("model failed" in d.reason for d in decisions(report, "x"))
    rng = np.random.default_rng(3)
    rows, cols = 3, 21
    args = {"x": rng.standard_normal(rows * cols), "y": np.zeros(rows * cols), "cols": np.uint64(cols)}
    check_cuda(k, g, rows, 8, args)


def test_grid_stride_loop_elements_are_private(tmp_path) -> None:
    # i = gid + k * (blockDim.x * gridDim.x) with 0 <= gid < blockDim.x * gridDim.x
    k, g, report = cuda_grad(tmp_path, "grid_stride")
    assert {d.strategy for d in decisions(report, "x")} == {"plain"}, [d.format() for d in report]
    assert atomics_into(g, "d_x") == 0
    rng = np.random.default_rng(4)
    n_ = 83  # 3 blocks of 8 threads: each thread visits 3 or 4 elements
    check_cuda(k, g, 3, 8, {"x": rng.standard_normal(n_), "y": np.zeros(n_), "n": np.uint64(n_)})
