"""collapse-identical-threads (gpu2cpu): threads that only an unread threadIdx dimension tells apart
run once. Checked: which dimensions count as identical, that the schedule keeps one copy, exact
results against the emulator for race-free kernels, the lockstep result for PolyBench MVT's racing
copies, and the kernels it must leave alone (atomics count every thread)."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import assert_same_as_emulator, run_c
from gpu2cpu.collapse_identical_threads import collapse_identical_threads, identical_thread_dims
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.ir.visitor import walk


def _kernel(text: str, name: str) -> n.Kernel:
    return load(None, text=text).kernel(name)


# PolyBench MVT's first kernel (written anew): launched with 32x8 blocks, i from threadIdx.x only
MVT = r"""
__global__ void mvt(int n, float *a, float *x1, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        for (int j = 0; j < n; j++)
            x1[i] += a[i * n + j] * y[j];
}
"""

SCALE = r"""
__global__ void scale(const float *a, float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = 2.0f * a[i] + (float)blockDim.y;
}
"""

COUNT = r"""
__global__ void count(int *hits, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&hits[0], 1);
}
"""

BARRIER = r"""
__global__ void staged(const float *a, float *x, int n)
{
    __shared__ float s[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? a[i] : 0.0f;
    __syncthreads();
    if (i < n)
        x[i] = s[31 - threadIdx.x];
}
"""

NONE_READ = r"""
__global__ void single(float *x)
{
    x[blockIdx.x] = 3.0f * (float)blockIdx.x;
}
"""


def test_identical_dimensions_are_those_no_expression_reads_unless_threads_are_counted():
    assert identical_thread_dims(_kernel(MVT, "mvt")) == (1, 2)
    assert identical_thread_dims(_kernel(SCALE, "scale")) == (1, 2)  # blockDim.y is read: still identical
    assert identical_thread_dims(_kernel(NONE_READ, "single")) == (0, 1, 2)
    assert identical_thread_dims(_kernel(COUNT, "count")) == ()  # an atomic counts every copy
    assert identical_thread_dims(_kernel(BARRIER, "staged")) == ()  # a barrier must be reached by all


def test_the_cpu_schedule_runs_one_copy_of_identical_threads():
    kernel = collapse_identical_threads(_kernel(MVT, "mvt"))
    assert isinstance(kernel.body[0], n.If) and len(kernel.body) == 1
    cpu = to_cpu(_kernel(MVT, "mvt"))
    loops = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads"]
    for loop in loops:
        if loop.var.startswith(("ty", "tz")):
            assert loop.stop == n.Const(1, loop.start.type), loop
    assert any(loop.var.startswith("tx") for loop in loops)
    # left alone: the atomic kernel keeps its ty loop over blockDim.y
    counted = to_cpu(_kernel(COUNT, "count"))
    assert any(isinstance(x, n.For) and x.var.startswith("ty") and x.stop == n.BlockDim(1) for x in walk(counted))


def _both_backends(text: str, name: str, grid, block, args):
    """The kernel through the C backend and the LLVM JIT (generic and specialized): each result."""
    yield run_c(_kernel(text, name), grid, block, args)
    for specialize in (False, True):
        out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        getattr(polypy.compile(None, text=text, specialize=specialize), name)[grid, block](**out)
        yield out


@pytest.mark.parametrize("block", [(32, 4, 2), (16, 8, 1), (8, 1, 3)])
def test_identical_threads_storing_the_same_values_give_that_value(block):
    """Copies storing what the others store (a benign race by CUDA's rules: the emulator refuses
    it, so NumPy is the reference)."""
    rng = np.random.default_rng(3)
    n_ = 70
    args = dict(a=rng.standard_normal(n_).astype(np.float32), x=np.zeros(n_, np.float32), n=np.int32(n_))
    grid = (-(-n_ // block[0]), 1, 1)
    for got in _both_backends(SCALE, "scale", grid, block, args):
        np.testing.assert_array_equal(got["x"], 2.0 * args["a"] + np.float32(block[1]))
    for got in _both_backends(NONE_READ, "single", (5, 1, 1), block, dict(x=np.zeros(5, np.float32))):
        np.testing.assert_array_equal(got["x"], 3.0 * np.arange(5, dtype=np.float32))


def test_mvt_copies_racing_on_x1_give_the_lockstep_result_through_both_backends():
    """MVT's eight copies of each i race on x1[i] (the emulator reports it). The translation gives
    x1 + A y, the lockstep schedule's result (and a GPU's), not x1 + 8 A y."""
    rng = np.random.default_rng(5)
    n_ = 40
    a = rng.standard_normal((n_, n_)).astype(np.float32)
    y = rng.standard_normal(n_).astype(np.float32)
    x1 = rng.standard_normal(n_).astype(np.float32)
    want = x1.astype(np.float64) + a.astype(np.float64) @ y.astype(np.float64)
    args = dict(n=np.int32(n_), a=a.ravel(), x1=x1, y=y)
    for got in _both_backends(MVT, "mvt", (2, 1, 1), (32, 8, 1), args):
        np.testing.assert_allclose(got["x1"], want, rtol=1e-4, atol=1e-4)


def test_atomics_count_every_thread_of_a_block():
    n_ = 50
    args = dict(hits=np.zeros(1, np.int32), n=np.int32(n_))
    got = assert_same_as_emulator(_kernel(COUNT, "count"), (2, 1, 1), (32, 4, 1), args)
    assert got["hits"][0] == n_ * 4


def test_the_report_says_which_threads_run_once():
    report: list = []
    to_cpu(_kernel(MVT, "mvt"), report=report)
    lines = [d.format() for d in report if "identical" in d.format()]
    assert len(lines) == 1 and "nothing reads threadIdx.y, threadIdx.z" in lines[0] and "mvt" in lines[0]
    report = []
    to_cpu(_kernel(COUNT, "count"), report=report)
    assert not [d for d in report if "identical" in d.format()]
