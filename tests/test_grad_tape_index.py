"""Tapes of block-strided loops without per-thread counters, and one tape for a value two loops
need (issue 38, softmax's backward through ``polypy.torch``).

* A tape in ``for (c = tid; c < n; c += blockDim.x)`` is indexed by ``(c - tid) / blockDim.x``
  (``autodiff.tapes._forward_index``), not by a counter carried from one iteration to the next
  (which the CPU schedule kept in a per-thread buffer: every tape store a scatter).
* ``exp(xr[c] - row_max)``, needed by the reverse sweeps of softmax's sum loop and of its output
  loop, is taped once, by the first loop (``autodiff.tapes._shared_tape``); with the output as
  scratch the output loop then disappears from the forward sweep. Not shared where a value it
  reads changes between the loops, or where the loops differ.
* An empty loop stepped by a launch dimension is dead code; the C backend still vectorizes the
  tape stores (the counter cancels in the index's numerator: ``codegen.lanes``).

Checked by the structure of the gradients, finite differences in float64 on several launch
shapes, and bit for bit against the gradient built without tapes sized at launch.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from autodiff import Caching
from autodiff.check import check_gradients
from polypy.driver.gradients import grad_kernel
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir.visitor import walk, walk_only


@pytest.fixture(scope="module")
def softmax():
    from samples.spec import sample

    module = polypy.load(sample("softmax_rows").source, defines={"REAL": "double"})
    report: list = []
    full = grad_kernel(module, "softmax_rows", report=report)
    scratch = grad_kernel(module, "softmax_rows", scratch_outputs=("y",))
    replayed = grad_kernel(module, "softmax_rows", runtime_tapes=False)
    return module, full, scratch, replayed, report


def _counted_fors(g: n.Kernel) -> list[str]:
    """The ``for`` loops of ``g`` whose body increments a counter of the forward sweep."""
    return [f.var for f in walk_only(g.body, n.For)
            if any(a.name.endswith("_count") for a in walk_only(f.body, n.Assign))]


def test_block_strided_tapes_are_indexed_by_the_loop_counter(softmax) -> None:
    _, full, scratch, _, _ = softmax
    assert _counted_fors(full) == [] and _counted_fors(scratch) == []
    tapes = {x.buffer for x in walk(full) if isinstance(x, n.Store) and x.buffer in ("m_tape", "value_tape")}
    assert tapes == {"m_tape", "value_tape"}


def test_the_exponentials_of_two_loops_share_one_tape(softmax) -> None:
    _, full, scratch, _, report = softmax
    sized = sorted(b.name for b in full.buffers if b.space == "local"
                   and any(not isinstance(d, n.Const) for d in b.shape or ()))
    assert sized == ["m_tape", "value_tape"], sized
    shared = [d for d in report if isinstance(d, Caching) and d.value.startswith("exp(") and "the tape" in d.detail]
    assert [(d.loc.line, d.detail) for d in shared] == [
        (37, "the tape value_tape of the same values, stored by the loop at line 36")], [d.format() for d in report]
    # with y as scratch, exp is evaluated by one forward loop only (the sum's), none in reverse
    loops = [f for f in walk_only(scratch.body, n.For)
             if any(isinstance(x, n.Call) and x.fn == "exp" for x in walk(f))]
    assert len(loops) == 1 and loops[0].loc.line == 36, [f.loc for f in loops]


@pytest.mark.parametrize("block,rows,cols", [(8, 3, 29), (4, 2, 16), (16, 2, 5), (8, 1, 1)])
def test_softmax_gradients_match_finite_differences_and_the_replayed_bits(softmax, block, rows, cols) -> None:
    module, full, scratch, replayed, _ = softmax
    rng = np.random.default_rng(cols)
    args = {"x": rng.standard_normal(rows * cols) * 3, "y": np.zeros(rows * cols), "cols": cols}
    result = check_gradients(module.kernel("softmax_rows"), full, (rows,), (block,), args)
    assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
    seed = rng.standard_normal(rows * cols)
    out = []
    for g in (full, scratch, replayed):
        a = {"x": args["x"].copy(), "d_x": np.zeros(rows * cols), "y": np.zeros(rows * cols), "d_y": seed.copy(),
             "cols": cols}
        emulate(g, (rows,), (block,), a)
        out.append(a["d_x"])
    assert np.array_equal(out[0], out[1]) and np.array_equal(out[0], out[2])


# Three loops with the same header and the same text exp(xr[c] * k): the first two see the same
# k and share a tape; k changes before the third, whose values are others. The fourth loop
# starts one column later: other iterations. The running maximum makes the gradient use tapes
# sized at launch (and so tape the exponentials).
THREE_LOOPS = r"""
__global__ void three_loops(const double* x, double* y, double* z, double* w, int n)
{
    int tid = threadIdx.x;
    const double* xr = x + blockIdx.x * n;
    double k = 0.5;
    double m = -1e300;
    double s = 0.0;
    for (int c = tid; c < n; c += blockDim.x) {
        m = fmax(m, xr[c]);
        s += exp(xr[c] * k);
    }
    for (int c = tid; c < n; c += blockDim.x)
        y[blockIdx.x * n + c] = exp(xr[c] * k) * s + m;
    k = k * 3.0;
    for (int c = tid; c < n; c += blockDim.x)
        z[blockIdx.x * n + c] = exp(xr[c] * k) * s;
    for (int c = tid + 1; c < n; c += blockDim.x)
        w[blockIdx.x * n + c] = exp(xr[c] * k);
}
"""

def test_a_value_changed_between_loops_or_other_iterations_get_their_own_tapes(tmp_path) -> None:
    src = tmp_path / "three.cu"
    src.write_text(THREE_LOOPS)
    module = polypy.load(str(src))
    report: list = []
    g = grad_kernel(module, "three_loops", report=report)
    taped = {d.loc.line: d.detail for d in report if isinstance(d, Caching) and d.value.startswith("exp(")}
    # the reverse sweep reaches line 14 first (its own tape), then line 11, which takes that tape
    # over (stored by the first loop); lines 17 and 19 have values of their own
    assert taped[11].startswith("the tape value_tape") and taped[11].endswith("stored by the loop at line 9"), taped
    assert all(taped[line].startswith("sized at launch") for line in (14, 17, 19)), taped
    assert len({x.buffer for x in walk(g) if isinstance(x, n.Store) and x.buffer.startswith("value_tape")}) == 3
    for block, rows, cols in ((4, 2, 11), (8, 3, 8), (2, 1, 5)):
        rng = np.random.default_rng(cols)
        size = rows * cols
        args = {"x": rng.standard_normal(size), "y": np.zeros(size), "z": np.zeros(size), "w": np.zeros(size),
                "n": cols}
        result = check_gradients(module.kernel("three_loops"), g, (rows,), (block,), args)
        assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result


EMPTY_LOOPS = r"""
__global__ void empty_loops(double* y, int n, int stride)
{
    for (int c = threadIdx.x; c < n; c += blockDim.x) { }
    for (int c = threadIdx.x; c < n; c += stride) { }
    y[threadIdx.x] = 1.0;
}
"""


def test_an_empty_loop_stepped_by_a_launch_dimension_is_dead(tmp_path) -> None:
    src = tmp_path / "empty.cu"
    src.write_text(EMPTY_LOOPS)
    k = polypy.load(str(src)).kernel("empty_loops")
    # the loop stepped by an argument stays: a step of 0 never ends it
    steps = [f.step for f in walk_only(k.body, n.For)]
    assert steps == [n.Var("stride", steps[0].type)], steps


def test_tape_stores_of_a_block_strided_loop_stay_vector_loops(softmax) -> None:
    from polypy.driver.gradients import gradient_cpp

    module, _, scratch, _, _ = softmax
    lines = gradient_cpp(module, scratch).splitlines()
    stores = [i for i, line in enumerate(lines) if line.strip().startswith(("m_tape[", "value_tape["))]
    assert len(stores) == 2, stores
    for i in stores:
        head = max(j for j in range(i) if lines[j].strip().startswith("for (unsigned int tx"))
        assert lines[head - 1].strip() == "#pragma omp simd", "\n".join(lines[head - 2:i + 1])
        assert "_count" not in lines[i], lines[i]
