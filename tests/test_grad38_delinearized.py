"""Row-major indices with a run-time row length, written the way Rodinia's backprop writes them
(issue 38, item 2): ``let at = (cols + 1) * TILE * r + (cols + 1) * ty + tx + 1 + (cols + 1)``.

The polyhedral model reads such an index as ``outer * P + inner`` with ``0 <= inner < P``
(``polypy.poly.builder``, ``Delinearized``). Three things kept it from doing so here, so that every
adjoint of the updated arrays was a global atomic:

* the index is a ``let`` the model cannot express (the product is not affine): the split now
  looks through such bindings when they read no memory and nothing assigned;
* ``(cols + 1) * TILE * r`` is a block value (opaque to isl) that is still a multiple of ``P``,
  and the trailing ``+ (cols + 1)`` is ``P`` written out: products by ``P`` are split too, and a
  multiple of ``P`` moves from the inner part to the outer one where that keeps ``inner`` in
  ``[0, P)``;
* the same array read at an affine index (``p[tx + 1]``) beside the row-major one: read as
  ``0 * P + e``, valid where ``0 <= e < P`` (``polypy.poly.relations``).

The adjoints are then versioned on the launch (``blockDim.x <= cols``, ...): plain ``+=`` where
it holds. Checked: the decisions, finite differences in float64 on four launches (compiled,
C, emulated), and bit for bit against the all-atomic gradient with integer-valued data.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from autodiff import Accumulation
from c_support import run_c
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.visitor import walk
from polypy.poly.model import build_model
from polypy.poly.sharing import sharing

# A weight update over rows of cols + 1 entries (row 0 and column 0 unused), one block per TILE
# rows; the first row of blocks also updates the entries 1..blockDim.x of row 0 (written anew
# in the shape of backprop's bpnn_adjust_weights_cuda).
UPDATE = r"""
#ifndef T
#define T double
#endif
#define TILE 16
__global__ void update(const T* g, int cols, const T* h, T* p, T* m)
{
    int r = blockIdx.y;
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int at = (cols + 1) * TILE * r + (cols + 1) * ty + tx + 1 + (cols + 1);
    int gi = tx + 1;
    int hi = TILE * r + ty + 1;
    p[at] += 0.5 * g[gi] * h[hi] + 0.25 * m[at] * m[at];
    m[at] = 0.5 * g[gi] * h[hi] + 0.75 * m[at];
    __syncthreads();
    if (ty == 0 && r == 0) {
        p[gi] += 0.5 * g[gi] * m[gi] + 0.25 * m[gi];
        m[gi] = 0.5 * g[gi] + 0.75 * m[gi] * m[gi];
    }
}
"""

TILE = 16
# (grid, block, cols): every launch keeps rows apart (blockDim.x <= cols, blockDim.y <= TILE,
# one column of blocks), as the program's own launch does; others race in the kernel itself
LAUNCHES = [((1, 2, 1), (8, 16, 1), 8), ((1, 2, 1), (4, 16, 1), 6), ((1, 3, 1), (8, 4, 1), 11),
            ((1, 1, 1), (2, 16, 1), 3)]


@pytest.fixture(scope="module")
def update():
    """(the kernel, its gradient, its decisions)."""
    mod = polypy.compile(None, text=UPDATE)
    report: list = []
    grad = polypy.grad(mod.update, report=report)
    return mod.update, grad, report


@pytest.fixture(scope="module")
def atomic(update):
    """The gradient without isl's privacy proofs: every adjoint of p and m atomic."""
    return polypy.grad(update[0], privacy=False, gather=False)


def _arguments(rng: np.random.Generator, grid, block, cols: int, integers: bool = False) -> dict:
    rows = TILE * grid[1] + 2
    sizes = {"g": block[0] + 1, "h": rows, "p": (cols + 1) * rows, "m": (cols + 1) * rows}
    if integers:  # small integers and dyadic coefficients: every sum of the gradient is exact
        arrays = {a: rng.integers(-3, 4, size).astype(np.float64) for a, size in sizes.items()}
    else:
        arrays = {a: rng.uniform(0.5, 1.5, size) for a, size in sizes.items()}
    return dict(arrays, cols=cols)


def _copy(args: dict) -> dict:
    return {a: v.copy() if isinstance(v, np.ndarray) else v for a, v in args.items()}


def test_the_model_splits_a_let_bound_index_with_a_block_value_and_the_factor_written_out():
    kernel = load(None, text=UPDATE).kernel("update")
    model = build_model(kernel)
    rows = [a for a in model.accesses_of("p") if "at" in a.text]
    assert rows and all(a.elems[0] is None and a.delin and a.delin[0] is not None for a in rows)
    for a in rows:
        assert a.delin[0].factor == "(cols + 1)" and a.delin[0].size is not None
        assert a.delin[0].valid is not None  # tx + 1 <= cols only for blocks at most cols wide
    for name in ("p", "m"):
        s = sharing(kernel, name)
        assert not s.thread_private and s.private_when is not None, name
        text = format_expr(s.private_when)
        for term in ("(i64)blockDim.y <= 16l", "(i64)gridDim.x <= 1l", "(i64)blockDim.x - (i64)cols <= 0l"):
            assert term in text, text


# ``at`` reads ``off``, which changes before the store: looked through, the index would be read
# with the new ``off`` (the next row); it must stay unknown. And a let bound once to launch
# indices and an unassigned parameter is looked through (the same index, ``off`` never assigned).
MOVED = """kernel moved(cols: i32, a: f32*) {
  var off: i32 = (i32)blockIdx.y
  let at: i32 = off * cols + (i32)threadIdx.y * cols + (i32)threadIdx.x
  off = off + 1
  a[at] = 1.0f
}
"""


def test_a_let_reading_an_assigned_local_is_not_looked_through():
    from polypy.ir import parse_kernel

    (a,) = build_model(parse_kernel(MOVED)).accesses_of("a")
    assert a.elems[0] is None and not any(d is not None for d in a.delin)
    (a,) = build_model(parse_kernel(MOVED.replace("  off = off + 1\n", ""))).accesses_of("a")
    assert a.delin and a.delin[0] is not None and a.delin[0].factor == "(cols)"


def test_the_adjoints_of_the_updated_arrays_are_versioned_not_atomic(update):
    _, grad, report = update
    got = [d for d in report if isinstance(d, Accumulation) and d.buffer in ("p", "m")]
    assert got and {d.strategy for d in got} == {"versioned"}, [d.format() for d in got]
    # plain adds to d_p and d_m exist (the version taken at these launches)
    plain = [x for x in walk(grad.gpu) if isinstance(x, n.Store) and x.buffer in ("d_p", "d_m")]
    assert plain


@pytest.mark.parametrize("grid,block,cols", LAUNCHES)
def test_the_gradient_matches_finite_differences_in_float64(update, grid, block, cols):
    kernel, grad, _ = update
    rng = np.random.default_rng(cols)
    args = _arguments(rng, grid, block, cols)
    active = ("g", "h", "p", "m")
    seeds = {a: rng.standard_normal(args[a].shape) for a in ("p", "m")}
    direction = {a: rng.standard_normal(args[a].shape) for a in active}

    def loss(t: float) -> float:
        moved = _copy(args)
        for a in active:
            moved[a] = moved[a] + t * direction[a]
        kernel[grid, block](**moved)
        return float(np.dot(seeds["p"], moved["p"]) + np.dot(seeds["m"], moved["m"]))

    h = 1e-5
    fd = (loss(-2 * h) - 8 * loss(-h) + 8 * loss(h) - loss(2 * h)) / (12 * h)
    full = _copy(args)
    full.update({f"d_{a}": np.zeros_like(args[a]) for a in ("g", "h")})
    full.update({f"d_{a}": seeds[a].copy() for a in ("p", "m")})
    runs = []
    for run in (lambda a: grad[grid, block](**a), lambda a: grad.emulate[grid, block](**a)):
        got = _copy(full)
        run(got)
        runs.append(got)
    runs.append(run_c(grad.gpu, grid, block, full))
    for got in runs:
        ad = sum(float(np.dot(got[f"d_{a}"], direction[a])) for a in active)
        assert abs(ad - fd) <= 1e-7 * max(1.0, abs(fd)), (ad, fd)


@pytest.mark.parametrize("grid,block,cols", LAUNCHES[:3])
def test_bit_for_bit_with_the_atomic_gradient_where_the_sums_are_exact(update, atomic, grid, block, cols):
    grad = update[1]
    assert sum(1 for x in walk(atomic.gpu) if isinstance(x, n.AtomicRMW) and x.buffer in ("d_p", "d_m")) > 0
    rng = np.random.default_rng(11 + cols)
    args = _arguments(rng, grid, block, cols, integers=True)
    args.update({f"d_{a}": np.zeros_like(args[a]) for a in ("g", "h")})
    args.update({f"d_{a}": rng.integers(-3, 4, args[a].shape).astype(np.float64) for a in ("p", "m")})
    want = _copy(args)
    atomic.emulate[grid, block](**want)
    assert all(np.any(want[f"d_{a}"] != 0) for a in ("g", "h", "p", "m"))
    runs = [run_c(grad.gpu, grid, block, args)]
    for g in (grad, grad.emulate):
        runs.append(_copy(args))
        g[grid, block](**runs[-1])
    for got in runs:
        for name in ("d_g", "d_h", "d_p", "d_m", "p", "m"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
