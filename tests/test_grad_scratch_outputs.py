"""``grad_kernel(..., scratch_outputs=...)``: a gradient without the forward's stores to outputs
the caller discards (issue 38: ``polypy.torch``'s backward rewrote softmax's ``y``, a pass over
memory nobody read). ``autodiff.scratch`` drops them where ``K_grad`` never reads the buffer back;
the input shadows are computed exactly as without the option (finite differences in float64,
several launch shapes; the same bits as the full gradient in the emulator), and the output's
memory is left alone. An output ``K_grad`` reads back keeps its stores. Where isl proves every
element of the output stored once (``polypy.poly.written_once``), the seed is only read.
"""
from __future__ import annotations

import numpy as np
import pytest

from autodiff import Caching
from autodiff.check import check_gradients
from polypy.ir import nodes as n
from polypy.ir.visitor import walk

# the output is read back: the second statement's value needs the first's
READ_BACK = """
__global__ void twice(const double* x, double* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] * x[i];
        y[i] = y[i] * y[i] + x[i];
    }
}
"""


@pytest.fixture(scope="module")
def softmax():
    import polypy
    from polypy.driver.gradients import grad_kernel
    from samples.spec import sample

    module = polypy.load(sample("softmax_rows").source, defines={"REAL": "double"})
    report: list = []
    scratch = grad_kernel(module, "softmax_rows", scratch_outputs=("y",), report=report)
    full = grad_kernel(module, "softmax_rows")
    return module.kernel("softmax_rows"), scratch, full, report


def _stores(g: n.Kernel, buffer: str) -> int:
    return sum(1 for x in walk(g) if isinstance(x, n.Store) and x.buffer == buffer)


def test_scratch_output_stores_are_left_out_and_reported(softmax) -> None:
    _, scratch, full, report = softmax
    assert _stores(full, "y") == 1 and _stores(scratch, "y") == 0
    assert [(d.value, d.strategy) for d in report if isinstance(d, Caching) and d.strategy == "scratch"] == [("y", "scratch")]
    assert [p.name for p in scratch.params] == [p.name for p in full.params]  # the calling convention


@pytest.mark.parametrize("grid,block,cols", [(3, 4, 5), (2, 8, 21), (1, 16, 37), (4, 32, 16)])
def test_scratch_gradient_matches_finite_differences_and_the_full_one(softmax, grid, block, cols) -> None:
    from c_support import run_emulated

    k, scratch, full, _ = softmax
    rng = np.random.default_rng(grid * 100 + cols)
    args = {"x": rng.standard_normal(grid * cols), "y": np.zeros(grid * cols), "cols": np.int32(cols)}
    # finite differences check the full gradient (the checker also reads the seed's final contents,
    # which a scratch output's caller never reads); the scratch one gives the same bits for d_x
    result = check_gradients(k, full, grid, block, args)
    assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
    seed = rng.standard_normal(grid * cols)
    seeded = {**args, "d_x": np.zeros(grid * cols), "d_y": seed.copy()}
    sentinel = np.full(grid * cols, np.nan)
    got = run_emulated(scratch, grid, block, {**seeded, "y": sentinel.copy()})
    want = run_emulated(full, grid, block, {**seeded, "d_y": seed.copy()})
    np.testing.assert_array_equal(got["d_x"], want["d_x"])
    # the rows cannot meet at these sizes ((gridDim.x - 1) * cols fits in 32 bits): the seed is
    # only read (the full gradient consumes it)
    np.testing.assert_array_equal(got["d_y"], seed)
    assert not want["d_y"].any()
    assert np.isnan(got["y"]).all()  # never written


def test_an_output_read_back_keeps_its_stores(tmp_path) -> None:
    import polypy
    from polypy.driver.gradients import grad_kernel

    src = tmp_path / "twice.cu"
    src.write_text(READ_BACK)
    module = polypy.load(str(src))
    report: list = []
    g = grad_kernel(module, "twice", scratch_outputs=("y",), report=report)
    assert _stores(g, "y") == 2
    assert not [d for d in report if isinstance(d, Caching) and d.strategy == "scratch"]
    rng = np.random.default_rng(7)
    for grid, block, size in ((2, 8, 13), (1, 32, 32)):
        args = {"x": rng.standard_normal(size), "y": np.zeros(size), "n": np.int32(size)}
        result = check_gradients(module.kernel("twice"), g, grid, block, args)
        assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
        assert result.forward_effect_error < 1e-12, result


def test_only_pointer_parameters_are_known_untouched(softmax) -> None:
    # polypy.torch skips zeroing a scratch output K_grad leaves alone; a name that is no pointer
    # parameter of the gradient (a record's or accessor's C name) is never taken as one
    from autodiff.scratch import untouched

    _, scratch, full, _ = softmax
    assert untouched(scratch, "y") and not untouched(full, "y")
    assert not untouched(scratch, "cols") and not untouched(scratch, "no_such_buffer")


ONCE = """
__global__ void simple(const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
__global__ void rows(const double* x, double* y, int n) {
  for (int c = threadIdx.x; c < n; c += blockDim.x) y[(int)blockIdx.x * n + c] = x[c];
}
__global__ void twice(const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { y[i] = x[i]; y[i] = 2.0 * x[i]; }
}
__global__ void iterations(const double* x, double* y, int n) {
  for (int k = 0; k < 4; k++) y[threadIdx.x] = x[k];
}
__global__ void pairs(const double* x, double* y, int n) {
  y[threadIdx.x / 2] = x[threadIdx.x];
}
__global__ void unsigned_rows(const double* x, double* y, int n) {
  for (int c = threadIdx.x; c < n; c += blockDim.x) y[blockIdx.x * n + c] = x[c];
}
"""


def test_written_once_is_proved_only_where_no_two_stores_meet() -> None:
    # two statements, two iterations of one thread, two threads, or rows that may wrap in u32
    import polypy
    from polypy.poly.written_once import written_once

    module = polypy.load(None, text=ONCE)
    got = {k.name: written_once(k, "y") for k in module.kernels}
    assert got == {"simple": True, "rows": True, "twice": False, "iterations": False, "pairs": False,
                   "unsigned_rows": False}, got
    assert not written_once(module.kernel("simple"), "x")  # read, not written


@pytest.fixture(scope="module")
def layernorm():
    import polypy
    from polypy.driver.gradients import grad_kernel
    from samples.spec import sample

    module = polypy.load(sample("layernorm").source, defines={"REAL": "double"})
    report: list = []
    scratch = grad_kernel(module, "layernorm", scratch_outputs=("y",), report=report)
    return module.kernel("layernorm"), scratch, grad_kernel(module, "layernorm"), report


@pytest.mark.parametrize("grid,block,cols", [(3, 4, 5), (2, 8, 21), (1, 16, 37)])
def test_a_seed_stored_once_per_element_is_only_read(layernorm, grid, block, cols) -> None:
    from c_support import run_emulated

    k, scratch, full, report = layernorm
    assert not any(isinstance(x, n.Store) and x.buffer == "d_y" for x in walk(scratch))
    assert any(isinstance(x, n.Store) and x.buffer == "d_y" for x in walk(full))
    assert any(d.strategy == "scratch" and "d_y is only read" in d.detail for d in report if isinstance(d, Caching))
    rng = np.random.default_rng(grid * 10 + cols)
    args = {"x": rng.standard_normal(grid * cols), "gamma": rng.standard_normal(cols),
            "beta": rng.standard_normal(cols), "y": np.zeros(grid * cols), "cols": np.int32(cols), "eps": 1e-5}
    # finite differences check the full gradient (the checker also reads the seed's final
    # contents, the gradient of y's initial values, which a scratch output's caller never reads);
    # the scratch one gives the same bits for every input's shadow
    result = check_gradients(k, full, grid, block, args)
    assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
    seed = rng.standard_normal(grid * cols)
    shadows = {"d_x": np.zeros(grid * cols), "d_gamma": np.zeros(cols), "d_beta": np.zeros(cols), "d_eps": np.zeros(1)}
    got = run_emulated(scratch, grid, block, {**args, **shadows, "d_y": seed.copy()})
    want = run_emulated(full, grid, block, {**args, **shadows, "d_y": seed.copy()})
    for name in shadows:
        np.testing.assert_array_equal(got[name], want[name])
    np.testing.assert_array_equal(got["d_y"], seed)  # read, never written


# rows of `stride` elements, one block each: two blocks' rows meet where stride < blockDim.x
STRIDED_ROWS = """
__global__ void strided_rows(const double* x, double* y, int stride) {
  int i = blockIdx.x * stride + threadIdx.x;
  y[i] = x[i] * x[i];
}
"""


def test_a_seed_stored_once_under_a_condition_is_read_only_where_it_holds(tmp_path) -> None:
    import polypy
    from c_support import run_emulated
    from polypy.driver.gradients import grad_kernel
    from polypy.launch import holds_at_launch
    from polypy.poly.written_once import written_once, written_once_when

    from autodiff.scratch import seed_read_when

    module = polypy.load(None, text=STRIDED_ROWS)
    k = module.kernel("strided_rows")
    assert not written_once(k, "y") and written_once_when(k, "y") is not None
    assert written_once_when(polypy.load(None, text=ONCE).kernel("twice"), "y") is None  # never once
    report: list = []
    scratch = grad_kernel(module, "strided_rows", scratch_outputs=("y",), report=report)
    full = grad_kernel(module, "strided_rows")
    assert any(d.strategy == "scratch" and "d_y is only read when" in d.detail for d in report
               if isinstance(d, Caching))
    when = seed_read_when(scratch, "d_y")
    assert when is not None and seed_read_when(full, "d_y") is None
    # (grid, block, stride): rows apart (stride >= block: the condition found may or may not
    # see it; where it does not, the seed is consumed), one block (it must see it). (Rows that
    # overlap are a data race the emulator refuses.)
    assert not holds_at_launch(when, "strided_rows_grad", (3, 4), {"stride": 2})
    for grid, block, stride, must in ((3, 4, 4, None), (2, 4, 7, None), (1, 8, 2, True)):
        size = (grid - 1) * stride + block
        rng = np.random.default_rng(size)
        args = {"x": rng.standard_normal(size), "y": np.zeros(size), "stride": np.int32(stride)}
        apart = holds_at_launch(when, "strided_rows_grad", (grid, block), {"stride": stride})
        assert must is None or apart == must
        seed = rng.standard_normal(size)
        got = run_emulated(scratch, grid, block, {**args, "d_x": np.zeros(size), "d_y": seed.copy()})
        want = run_emulated(full, grid, block, {**args, "d_x": np.zeros(size), "d_y": seed.copy()})
        np.testing.assert_array_equal(got["d_x"], want["d_x"])
        if apart:
            np.testing.assert_array_equal(got["d_y"], seed)  # only read
        else:
            np.testing.assert_array_equal(got["d_y"], want["d_y"])  # consumed as the convention says
        result = check_gradients(k, full, grid, block, args)
        assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
