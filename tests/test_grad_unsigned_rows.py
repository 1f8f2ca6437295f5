"""Row kernels whose row offset is an unsigned product (issue 38: softmax_rows' adjoints were atomics).

``x + blockIdx.x * cols`` multiplies in ``unsigned``: the product wraps modulo ``2**32``, so two
blocks' rows may meet and isl could not prove the adjoint updates private. They cannot wrap when
the last block's product ``(u64)(gridDim.x - 1) * (u64)cols`` fits in 32 bits: the model keeps
blocks ``cols`` apart under that condition (``Model.block_factors``), and the gradient tests it
once per launch (a plain ``+=`` version and an atomic one). A read every thread of a block makes
(``xr[0]``) is summed per block and added once after a barrier: it is left out of the thread
question, which then only needs that no other block touches its element.

Every gradient is checked against finite differences in float64 in the emulator, in both versions.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autodiff import Accumulation
from autodiff.check import check_gradients
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.visitor import walk

ROWS = """
__global__ void rowscale(const double* x, double* y, int cols)
{
    const double* xr = x + blockIdx.x * cols;   // unsigned row offset
    double* yr = y + blockIdx.x * cols;
    double first = xr[0];                       // every thread of the block reads it
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        yr[c] = xr[c] * xr[c] * first;
}
"""


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    import polypy
    from polypy.driver.gradients import grad_kernel

    src = tmp_path_factory.mktemp("rows") / "rows.cu"
    src.write_text(ROWS)
    module = polypy.load(str(src))
    report: list = []
    g = grad_kernel(module, "rowscale", report=report)
    return module.kernel("rowscale"), g, report


def _strategies(report) -> dict[str, str]:
    return {d.access: d.strategy for d in report if isinstance(d, Accumulation) and d.buffer == "x"}


def _flag(g: n.Kernel) -> n.Decl:
    flags = [s for s in g.body if isinstance(s, n.Decl) and s.name.startswith("x_private")]
    assert len(flags) == 1
    return flags[0]


def test_unsigned_row_offset_adjoints_are_versioned_not_atomic(rows) -> None:
    _, g, report = rows
    got = _strategies(report)  # xr[0], and xr[c] in the loop
    assert got == {"x[blockIdx.x * (u32)cols]": "block-reduction",
                   "x[(i64)(blockIdx.x * (u32)cols) + (i64)c]": "versioned"}, got
    cond = format_expr(_flag(g).init)
    assert "(u64)(gridDim.x - 1u) * (u64)((u32)cols)" in cond and "4294967295" in cond, cond
    # the plain version stores into d_x; the only other updates of d_x are atomics
    plain = [s for s in walk(g) if isinstance(s, n.If) and isinstance(s.cond, n.Var) and s.cond.name == _flag(g).name]
    assert plain and all(isinstance(s.then[0], n.Store) and s.then[0].buffer == "d_x" for s in plain)


@pytest.mark.parametrize("grid,block,cols", [(3, 4, 5), (4, 8, 21), (2, 32, 37), (1, 8, 3)])
@pytest.mark.parametrize("version", ["private", "atomic"])
def test_unsigned_row_gradient_matches_finite_differences(rows, grid, block, cols, version) -> None:
    k, g, _ = rows
    if version == "atomic":  # the version a launch whose row offsets could wrap runs
        flag = _flag(g)
        body = tuple(dataclasses.replace(s, init=n.Const(False, flag.vtype)) if s is flag else s for s in g.body)
        g = dataclasses.replace(g, body=body)
    rng = np.random.default_rng(grid * 100 + cols)
    args = {"x": rng.standard_normal(grid * cols), "y": np.zeros(grid * cols), "cols": np.int32(cols)}
    result = check_gradients(k, g, grid, block, args)
    assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result


def _grad_args(g: n.Kernel, grid: int, cols: int) -> dict:
    rng = np.random.default_rng(cols)
    size = grid * cols
    values = {"x": rng.standard_normal(size), "d_x": np.zeros(size), "y": np.zeros(size),
              "d_y": rng.standard_normal(size), "cols": np.int32(cols)}
    return {p.name: values[p.name] for p in g.params}


@pytest.mark.parametrize("version", ["private", "atomic"])
def test_unsigned_row_gradient_on_the_c_backend_matches_the_emulator(rows, version) -> None:
    from c_support import assert_same_as_emulator, need_compiler

    need_compiler()
    _, g, _ = rows
    if version == "atomic":
        flag = _flag(g)
        g = dataclasses.replace(g, body=tuple(dataclasses.replace(s, init=n.Const(False, flag.vtype))
                                              if s is flag else s for s in g.body))
    assert_same_as_emulator(g, 3, 8, _grad_args(g, 3, 21), rtol=1e-13, atol=1e-15)


def test_unsigned_row_gradient_through_the_llvm_jit_matches_the_emulator(rows, tmp_path) -> None:
    import polypy
    from c_support import run_emulated

    _, g, _ = rows
    src = tmp_path / "rows.cu"
    src.write_text(ROWS)
    launch = polypy.grad(getattr(polypy.compile(str(src)), "rowscale"))
    for grid, block, cols in [(3, 8, 21), (2, 32, 37)]:
        args = _grad_args(g, grid, cols)
        want = run_emulated(g, grid, block, args)
        got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        launch[grid, block](**got)
        for name in ("d_x", "d_y", "y"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-13, atol=1e-15, err_msg=name)
