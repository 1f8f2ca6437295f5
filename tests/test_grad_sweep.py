"""The single-sweep gather (issue 38 item 1, ``autodiff.sweep``): every tap of a read-only
stencil input in one launch in which the thread that owns an element of ``d_A`` adds what each
tap gives it, then the halos (elements whose owner is outside the launch) in launches of their
own, skipped by one grid-uniform test where isl shows the launch covers them. Checked against
float64 finite differences on launches that cover the data and launches that do not (halos
run), emulated, bit for bit against the tap launches and the one-kernel gradient with exact
sums, under isl's run-time condition (held and not held), and the report."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from autodiff import Accumulation
from autodiff.sweep import find_shift
from polypy.ir import nodes as ir
from polypy.ir.types import I32, U32
from test_grad_gather import (RUNTIME_BOUND, STENCIL_2D, STENCIL_3D, _arrays, _fd_check, _kinds, _module)


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    return _module(tmp_path_factory.mktemp("sweep"), "conv", STENCIL_2D)


# the launch covers 16 x 8 threads of a 40-column array: the owners of the right and bottom
# edges are outside it, so the halo launches run
@pytest.mark.parametrize("grid,block,ni", [((2, 2), (8, 4), 15), ((3, 5), (16, 2), 11), ((5, 4), (8, 4), 15)])
def test_sweep_matches_finite_differences_with_and_without_halos(conv, grid, block, ni) -> None:
    g = _fd_check(conv, "conv", (grid, block), {"ni": ni}, {"A": ni * 40, "B": ni * 40}, "B")
    assert _kinds(g)[0] == "sweep"


def test_sweep_emulated_on_a_launch_with_halos(conv) -> None:
    _fd_check(conv, "conv", ((3, 2), (8, 4)), {"ni": 11}, {"A": 11 * 40, "B": 11 * 40}, "B", emulate=True)


def _exact_run(g, k, launch, ints, sizes, out):
    rng = np.random.default_rng(11)
    arrays = _arrays(k, sizes, rng, integer=True)
    inp = [p for p in sizes if p != out][0]
    d_in = rng.integers(-4, 5, sizes[inp]).astype(np.float64)  # accumulated into
    seed = rng.integers(-4, 5, sizes[out]).astype(np.float64)
    args = {}
    for p in g.gpu.params:
        if p.name in ints:
            args[p.name] = ints[p.name]
        elif p.name in arrays:
            args[p.name] = arrays[p.name].copy()
        else:
            args[p.name] = (seed if p.name == "d_" + out else d_in).copy()
    g[launch](**args)
    return {key: v for key, v in args.items() if isinstance(v, np.ndarray)}


@pytest.mark.parametrize("name,text,launch,ints,sizes", [
    ("conv", STENCIL_2D, ((6, 5), (8, 4)), {"ni": 17}, {"A": 17 * 40, "B": 17 * 40}),
    ("conv", STENCIL_2D, ((2, 3), (16, 4)), {"ni": 13}, {"A": 13 * 40, "B": 13 * 40}),  # halos run
    ("heat", STENCIL_3D, ((1, 2, 5), (8, 4, 2)), {"ni": 9}, {"A": 9 * 120, "B": 9 * 120}),  # halos run
    ("conv_n", RUNTIME_BOUND, ((4, 3), (8, 8)), {"ni": 20, "nj": 24}, {"A": 20 * 24, "B": 20 * 24}),
    ("conv_n", RUNTIME_BOUND, ((4, 3), (8, 8)), {"ni": 20, "nj": 26}, {"A": 21 * 24, "B": 21 * 24}),
])
def test_bit_for_bit_against_taps_and_one_kernel(tmp_path, name, text, launch, ints, sizes) -> None:
    """With integer-valued data and dyadic coefficients every sum is exact: the sweep, the tap
    launches and the one-kernel gradient leave the same bits in every buffer and shadow."""
    mod = _module(tmp_path, name, text)
    k = getattr(mod, name)
    sweep = polypy.grad(k)
    assert _kinds(sweep)[0] == "sweep"
    out = "B"
    results = [_exact_run(g, k, launch, ints, sizes, out)
               for g in (sweep, polypy.grad(k, gather="taps"), polypy.grad(k, gather=False))]
    for other in results[1:]:
        assert results[0].keys() == other.keys()
        for key in results[0]:
            assert np.array_equal(results[0][key], other[key]), key


@pytest.mark.parametrize("grid,block,ni,nj", [((3, 3), (8, 8), 20, 24), ((4, 2), (8, 8), 13, 26)])
def test_sweep_under_a_run_time_condition(tmp_path, grid, block, ni, nj) -> None:
    """Rows of the macro's length, columns bounded by an argument: the taps are private where
    nj <= NJ + 2, the sweep (whose owners reach one column further each way) where nj <= NJ;
    at nj = 26 the sweep does not run and the rest adds every tap's update atomically."""
    mod = _module(tmp_path, "conv_n", RUNTIME_BOUND)
    g = _fd_check(mod, "conv_n", (grid, block), {"ni": ni, "nj": nj}, {"A": ni * 24, "B": ni * 24}, "B")
    assert _kinds(g)[0] == "sweep"
    assert all(len(t.gpu.body) == 1 and isinstance(t.gpu.body[0], ir.If) for t in g.taps)  # under the condition


# a[i] and a[2i] (threads 2 and 1 read a[2]): no shift of the threads maps one read relation
# onto the other
PAIRS = r"""
__global__ void pairs(const double* a, double* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    b[i] = 3.0 * a[i] - a[2 * i];
}
"""


def test_report_says_single_sweep_or_why_not(conv, tmp_path) -> None:
    report: list = []
    polypy.grad(conv.conv, report=report)
    forms = [d for d in report if isinstance(d, Accumulation) and d.buffer == "A"]
    assert forms and all(d.strategy == "gather" and "single sweep" in d.reason for d in forms)
    assert "shifted by" in forms[0].reason and "no atomics" in forms[0].reason
    taps: list = []
    polypy.grad(conv.conv, report=taps, gather="taps")
    assert not any("single sweep" in d.reason for d in taps if isinstance(d, Accumulation))
    pairs: list = []
    mod = _module(tmp_path, "pairs", PAIRS)
    g = polypy.grad(mod.pairs, report=pairs)
    why = [d.reason for d in pairs if isinstance(d, Accumulation) and d.buffer == "a"]
    assert why and all("tap launches, no single sweep" in r and "in 2 classes, not one" in r for r in why), why
    assert _kinds(g) == ["tap"]  # a[2i + 1]'s updates run in the rest
    _fd_check(mod, "pairs", ((3,), (8,)), {"n": 20}, {"a": 40, "b": 20}, "b")


def test_gather_option_is_checked(conv) -> None:
    with pytest.raises(polypy.UserError, match="gather is True, False, 'taps' or 'sweep'"):
        polypy.grad(conv.conv, gather="fast")


def _g(d: int) -> ir.Expr:
    return ir.Cast(I32, ir.Binary("add", ir.Binary("mul", ir.BlockIdx(d), ir.BlockDim(d)), ir.ThreadIdx(d)))


def _c(v: int) -> ir.Expr:
    return ir.Const(v, I32)


def test_find_shift() -> None:
    """Shifts of the global indices that make one index another: rows of a constant or an
    argument's length, none where the linear parts differ or a cast may wrap."""
    i, j, w = _g(1), _g(0), ir.Var("w", I32)
    row = lambda a, b, n: ir.Binary("add", ir.Binary("mul", ir.Binary("add", i, _c(a)), n), ir.Binary("add", j, _c(b)))  # noqa: E731
    assert find_shift((row(0, 0, _c(40)),), (row(-1, 1, _c(40)),), (0, 1)) == {0: -1, 1: 1}
    assert find_shift((row(0, 0, w),), (row(1, -2, w),), (0, 1)) == {0: 2, 1: -1}
    assert find_shift((row(0, 0, w),), (ir.Binary("mul", _c(2), j),), (0, 1)) is None
    assert find_shift((j,), (ir.Binary("add", ir.Cast(U32, j), ir.Const(1, U32)),), (0,)) is None  # may wrap
