"""Block-strided loops that carry a running value (issue 38 item 3): ``samples/softmax_rows.cu``
keeps a running maximum ``m = fmax(m, xr[c])`` over ``for (c = tid; c < cols; c += blockDim.x)``.
The step is a launch dimension, so the trip count (largest at thread 0) is a function the driver
evaluates at launch: the carried register is taped in a tape sized there instead of being replayed
from the loop entry in each reversed iteration (quadratic in ``cols / blockDim.x``), and the
exponentials those loops need in the reverse sweep are taped too instead of evaluated again
(``availability.dear_in_launch_sized_loop``). Checked:
the report, finite differences in float64 (emulator) on several launch shapes, bit for bit
against the replaying form (the same values in the same order), the compiled gradient against
the emulated one, and which steps count as positive at every launch (``launch_positive``)."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import polypy
from autodiff import Caching
from autodiff.check import check_gradients
from autodiff.loops import launch_positive
from polypy.driver.gradients import grad_kernel
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir.types import I32, I64
from polypy.ir.visitor import walk

SOURCE = pathlib.Path(__file__).resolve().parents[1] / "samples" / "softmax_rows.cu"


@pytest.fixture(scope="module")
def module():
    return polypy.load(str(SOURCE), defines={"REAL": "double"})


@pytest.fixture(scope="module")
def taped(module):
    report: list = []
    return grad_kernel(module, "softmax_rows", report=report), report


@pytest.fixture(scope="module")
def replayed(module):
    report: list = []
    return grad_kernel(module, "softmax_rows", report=report, runtime_tapes=False), report


def test_running_maximum_of_a_block_strided_loop_is_taped(taped, replayed) -> None:
    g, report = taped
    caching = [d for d in report if isinstance(d, Caching)]
    assert not any(d.strategy == "replay-loop" for d in caching), [d.format() for d in caching]
    assert any(d.value == "m" and "instead of replaying the loop" in d.detail for d in caching), \
        [d.format() for d in caching]
    sized = [b for b in g.buffers if b.space == "local" and any(not isinstance(e, n.Const) for e in b.shape or ())]
    # one tape for the exponentials both reversed loops need (tests/test_grad_tape_index.py)
    assert sorted(b.name for b in sized) == ["m_tape", "value_tape"], sized
    old = [d for d in replayed[1] if isinstance(d, Caching) and d.strategy == "replay-loop"]
    assert {d.value for d in old} == {"m"}


def test_exponentials_of_the_launch_sized_loops_are_taped_not_evaluated_again(taped, replayed) -> None:
    # exp(xr[c] - row_max) of the sum (line 37) and of the output (line 48): the same values,
    # stored once by the forward sweep (in the sum's loop) in the taped build; the build without
    # tapes sized at launch evaluates them again
    taped_exp = {d.loc.line: d.detail for d in taped[1] if isinstance(d, Caching) and d.value.startswith("exp(")
                 and d.strategy == "tape"}
    assert sorted(taped_exp) == [37, 48], [d.format() for d in taped[1]]
    assert "sized at launch" in taped_exp[48] and "the tape value_tape of the same values" in taped_exp[37]
    assert not any(isinstance(d, Caching) and d.value.startswith("exp(") for d in replayed[1])
    g = taped[0]
    loads = {x.buffer for x in walk(g) if isinstance(x, n.Load) and x.buffer.startswith("value_tape")}
    assert loads == {"value_tape"}, loads


def _args(rows: int, cols: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal(rows * cols) * 3, "y": np.zeros(rows * cols), "cols": cols}


# (rows = grid, block, cols): several trips per thread, a partial last trip, fewer columns than
# threads (one trip or none), one column.
@pytest.mark.parametrize("block,rows,cols", [(8, 3, 29), (4, 2, 16), (16, 2, 5), (2, 3, 9), (8, 1, 1)])
def test_gradient_matches_finite_differences(module, taped, block, rows, cols) -> None:
    result = check_gradients(module.kernel("softmax_rows"), taped[0], (rows,), (block,), _args(rows, cols, cols))
    assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result


@pytest.mark.parametrize("block,rows,cols", [(8, 3, 29), (4, 2, 6)])
def test_taped_and_replayed_gradients_agree_bit_for_bit(taped, replayed, block, rows, cols) -> None:
    rng = np.random.default_rng(5)
    x, seed = rng.standard_normal(rows * cols) * 3, rng.standard_normal(rows * cols)
    out = []
    for g in (taped[0], replayed[0]):
        args = {"x": x.copy(), "d_x": np.zeros_like(x), "y": np.zeros_like(x), "d_y": seed.copy(), "cols": cols}
        emulate(g, (rows,), (block,), args)
        out.append(args["d_x"])
    assert np.array_equal(out[0], out[1]) and np.count_nonzero(out[0]) == rows * cols


def test_compiled_gradient_matches_emulated_gradient(monkeypatch) -> None:
    import autodiff.tapes

    mod = polypy.compile(SOURCE, defines={"REAL": "double"})
    g = polypy.grad(mod.softmax_rows)
    asked = []
    real = autodiff.tapes.tape_extents
    monkeypatch.setattr(autodiff.tapes, "tape_extents", lambda *a: asked.append(a[3]) or real(*a))
    # 6 trips for thread 0 and 5 for the last threads; the same launch again (its extents are
    # remembered, not asked of isl again); then rows 3x longer, whose tape must be longer too
    for rows, cols, block in ((3, 45, 8), (3, 45, 8), (2, 135, 8)):
        rng = np.random.default_rng(cols)
        x, seed = rng.standard_normal(rows * cols) * 3, rng.standard_normal(rows * cols)
        out = []
        for run in (g[rows, block], g.emulate[rows, block]):
            d_x = np.zeros_like(x)
            run(x.copy(), d_x, np.zeros_like(x), seed.copy(), cols)
            out.append(d_x)
        np.testing.assert_allclose(out[0], out[1], rtol=1e-12, atol=1e-14)
    assert [a["cols"] for a in asked] == [45, 135]


def test_launch_positive_steps() -> None:
    bx, gx = n.BlockDim(0), n.GridDim(0)
    assert launch_positive(n.Cast(I32, bx), I32)
    assert launch_positive(n.Binary("mul", n.Cast(I32, bx), n.Const(4, I32)), I32)
    # blockDim.x * gridDim.x wraps in 32 bits at the largest grids; in 64 bits it cannot
    wide = n.Binary("mul", n.Cast(I64, bx), n.Cast(I64, gx))
    assert launch_positive(wide, I64)
    assert not launch_positive(n.Cast(I32, n.Binary("mul", bx, gx)), I32)
    assert not launch_positive(n.Cast(I32, wide), I32)
    assert not launch_positive(n.Var("stride", I32), I32)  # an argument may be 0 or negative
    assert not launch_positive(n.Binary("mul", n.Cast(I32, bx), n.Const(-1, I32)), I32)
    assert not launch_positive(n.Binary("sub", n.Cast(I32, bx), n.Const(1, I32)), I32)  # 0 for one thread


def test_cpp_tapes_are_bounded_for_every_thread(taped) -> None:
    """``polypy grad --emit cpp`` allocates per-thread arrays once per launch: the extent of a
    block-strided loop's tape (a division by blockDim.x) is bounded over the threads by its value
    at thread 0 (the division never decreases, the divisor being at least 1 and the same for all)."""
    from autodiff.tapes import runtime_tapes, tape_extents, uniform_extents

    g = taped[0]
    bounded = uniform_extents(g)
    assert len(runtime_tapes(bounded)) == 2
    assert not any(isinstance(x, (n.ThreadIdx, n.BlockIdx)) for buf in runtime_tapes(bounded)
                   for d in buf.shape for x in walk(d))
    for block, cols in ((8, 29), (8, 32), (16, 5), (4, 0)):
        assert tape_extents(bounded, (3,), (block,), {"cols": cols}) == tape_extents(g, (3,), (block,), {"cols": cols})


GUARDED = r"""
__global__ void guarded(const double* x, double* y, int m)
{
    double acc = -1e300;
    for (int c = threadIdx.x; c < m; c += blockDim.x) {
        acc = fmax(acc, x[c]);
        y[c] = (c + 1 < m) ? exp(x[c + 1] - acc) : 0.0;
    }
}
"""


def test_a_call_in_a_branch_that_may_not_run_is_not_taped(tmp_path) -> None:
    """A tape's store evaluates the call before the statement: ``exp(x[c + 1] - acc)`` under
    ``c + 1 < m ?`` would read x[m]; it is evaluated again in the reverse sweep instead."""
    src = tmp_path / "guarded.cu"
    src.write_text(GUARDED)
    module = polypy.load(str(src))
    report: list = []
    g = grad_kernel(module, "guarded", report=report)
    caching = [d for d in report if isinstance(d, Caching)]
    assert any(d.value == "acc" and "instead of replaying" in d.detail for d in caching)
    assert not any(d.value.startswith("exp(") for d in caching), [d.format() for d in caching]
    for block, m in ((4, 13), (8, 8), (2, 3)):
        rng = np.random.default_rng(m)
        args = {"x": rng.standard_normal(m), "y": np.zeros(m), "m": m}
        result = check_gradients(module.kernel("guarded"), g, (1,), (block,), args)
        assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
