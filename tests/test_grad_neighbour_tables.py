"""Gradients of kernels that read their neighbours through an index table (cfd's ``compute_flux``:
``variables[nb]``, ``nb`` read from ``elements_surrounding_elements``), whose adjoints are atomic
adds scattered through loaded indices.

* sink-thread-loops keeps the short loop over the neighbours inside the loop over the threads:
  interchanged, every value live across the loop's parts went through an array per thread (about
  80 for cfd) and each add stayed atomic (7.3x the forward instead of 4.5x, CPU time, one thread,
  in the code for coarse blocks that launches of many blocks run). Adds to one element the same
  for every thread still interchange (they become sums, ``test_sum_uniform_atomics``).
* A value several adjoint statements read gets one tape (cfd's ``velocity_nb_x`` had five copies).

Checked: the CPU form, the tapes, the gradient against finite differences in float64 on several
launches, and bit for bit against the emulator (GPU form) where the sums are exact."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import run_c
from polypy.driver.coarsen import coarsen_for_block
from polypy.driver.gradients import gradient_source
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.ir.visitor import walk, walk_block

# Each element sums a flux over its four neighbours (an index table, -1 for a wall), the shape
# of cfd's compute_flux (written anew for this test).
FLUX = r"""
#ifndef T
#define T double
#endif
__global__ void flux(int n, const int* nbr, const T* w, const T* v, T* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    T a = v[i];
    T b = v[i + n];
    T s = a * b;
    T acc0 = 0;
    T acc1 = 0;
    for (int j = 0; j < 4; j++) {
        int k = nbr[i + j * n];
        T wj = w[i + j * n];
        if (k >= 0) {
            T c = v[k];
            T d = v[k + n];
            T f = wj * (s + c * d);
            acc0 += f * (a - c);
            acc1 += f * (b - d);
        } else {
            acc0 += wj * a;
        }
    }
    out[i] = acc0;
    out[i + n] = acc1;
}
"""

LAUNCHES = [((4, 1, 1), (32, 1, 1)), ((3, 1, 1), (64, 1, 1)), ((1, 1, 1), (96, 1, 1))]


@pytest.fixture(scope="module")
def flux():
    """(the kernel, its gradient, the gradient's CUDA source compiled with coarse blocks of 2 at
    every launch: the code where the loop over the neighbours is short)."""
    mod = polypy.compile(None, text=FLUX)
    grad = polypy.grad(mod.flux)
    coarse = polypy.compile(None, text=gradient_source(load(None, text=FLUX), grad.gpu), coarsen=2)
    return mod.flux, grad, coarse.flux_grad


def _arguments(rng: np.random.Generator, count: int, integers: bool = False) -> dict:
    nbr = rng.integers(0, count, 4 * count).astype(np.int32)
    nbr[rng.random(4 * count) < 0.2] = -1
    if integers:  # small integers: every sum and product of the gradient is exact
        w, v = (rng.integers(-3, 4, size).astype(np.float64) for size in (4 * count, 2 * count))
    else:
        w, v = rng.uniform(0.5, 1.5, 4 * count), rng.uniform(0.5, 1.5, 2 * count)
    return {"n": count, "nbr": nbr, "w": w, "v": v, "out": np.zeros(2 * count)}


def _scattered_adds(loop: n.For) -> bool:
    return any(isinstance(x, n.AtomicRMW) and any(isinstance(y, n.Load) for i in x.index for y in walk(i))
               for x in walk_block(loop.body))


def test_the_loop_of_scattered_adds_stays_inside_the_loop_over_threads(flux):
    """In the code for coarse blocks (what launches of many blocks run: the loop over the
    neighbours is then a short constant loop), the loop holding the scattered adds is not
    interchanged."""
    _, grad, _ = flux
    cpu = coarsen_for_block(grad.gpu, block=(32, 1, 1), factor=4)
    assert cpu is not None
    serial = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "serial" and _scattered_adds(x)]
    assert serial, "no serial loop holds the scattered atomic adds"
    for loop in serial:
        # not interchanged: no loop over the threads inside it
        assert not any(isinstance(y, n.For) and y.kind == "threads" for y in walk_block(loop.body))
    # no per-thread array made for an adjoint live across interchanged parts (d_a_x, ...)
    assert not [b.name for b in cpu.buffers if b.name.startswith("d_") and b.name.endswith("_x")]


# Scattered adds in a short loop, next to a stride-1 read (the loop would be worth interchanging).
SCATTER = r"""
__global__ void scatter(const int* idx, const float* x, float* d, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int j = 0; j < 4; j++)
        atomicAdd(&d[idx[i + j * n]], x[i + j * n]);
}
"""


def test_the_report_says_why_a_short_loop_of_scattered_adds_stays_inside():
    report: list = []
    cpu = to_cpu(load(None, text=SCATTER).kernel("scatter"), report=report)
    lines = [d.format() for d in report]
    assert any("the short loop 'j' stays inside it: its atomic adds are to an element per thread" in x
               for x in lines), lines
    loops = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "serial"]
    assert loops and not any(isinstance(y, n.For) and y.kind == "threads" for x in loops for y in walk_block(x.body))


@pytest.mark.parametrize("grid,block", LAUNCHES)
def test_the_gradient_matches_finite_differences_in_float64(flux, grid, block):
    kernel, grad, coarse = flux
    count = grid[0] * block[0]
    rng = np.random.default_rng(count)
    args = _arguments(rng, count)
    seed = rng.standard_normal(2 * count)
    direction = {a: rng.standard_normal(args[a].shape) for a in ("w", "v")}

    def loss(t: float) -> float:
        moved = dict(args, w=args["w"] + t * direction["w"], v=args["v"] + t * direction["v"], out=np.zeros(2 * count))
        kernel[grid, block](**moved)
        return float(np.dot(seed, moved["out"]))

    h = 1e-5
    fd = (loss(-2 * h) - 8 * loss(-h) + 8 * loss(h) - loss(2 * h)) / (12 * h)
    for g in (grad, coarse):
        full = dict(args, d_w=np.zeros_like(args["w"]), d_v=np.zeros_like(args["v"]), d_out=seed.copy())
        g[grid, block](**full)
        ad = float(np.dot(full["d_w"], direction["w"]) + np.dot(full["d_v"], direction["v"]))
        assert abs(ad - fd) <= 1e-7 * max(1.0, abs(fd)), (ad, fd)


@pytest.mark.parametrize("grid,block", LAUNCHES[:2])
def test_bit_for_bit_with_the_emulated_gradient_where_the_sums_are_exact(flux, grid, block):
    """Small integers: every adjoint is exact in any order, so the compiled gradient (LLVM, also
    with coarse blocks, and C) equals the emulated GPU form bit for bit."""
    _, grad, coarse = flux
    count = grid[0] * block[0]
    rng = np.random.default_rng(7 + count)
    args = _arguments(rng, count, integers=True)
    args.update(d_w=np.zeros(4 * count), d_v=np.zeros(2 * count),
                d_out=rng.integers(-3, 4, 2 * count).astype(np.float64))
    want = {a: v.copy() if isinstance(v, np.ndarray) else v for a, v in args.items()}
    grad.emulate[grid, block](**want)
    assert np.any(want["d_v"] != 0) and np.any(want["d_w"] != 0)
    runs = [run_c(grad.gpu, grid, block, args)]
    for g in (grad, coarse):
        runs.append({a: v.copy() if isinstance(v, np.ndarray) else v for a, v in args.items()})
        g[grid, block](**runs[-1])
    assert coarse.coarsened[block] == 2
    for got in runs:
        for name in ("d_w", "d_v", "out"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_a_value_read_by_several_adjoints_is_taped_once(flux):
    """``f`` is read by the adjoints of ``acc0``'s and ``acc1``'s updates (and of ``c``, ``d``):
    one tape, stored once per iteration."""
    _, grad, _ = flux
    tapes = [b.name for b in grad.gpu.buffers if "_tape" in b.name]
    assert len([t for t in tapes if t.startswith("f_tape")]) == 1, tapes
    stores = [x for x in walk(grad.gpu) if isinstance(x, n.Store) and x.buffer in tapes]
    assert len(stores) == len(tapes)
