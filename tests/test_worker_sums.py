"""Sums per worker in the C launcher (``codegen.c.launch_policy.worker_sums``): a pointer
parameter that only receives atomic adds, always to one constant element (reduce_sum's
``*out += block_sum``), is summed by each OpenMP worker in a copy of its own and added to the
array once per worker instead of once per block. Checked: which parameters qualify, the launcher
text, and results -- exact for integers, signed zeros kept -- against the emulator on several
grids, a one-block grid included."""
from __future__ import annotations

import numpy as np
import pytest

from c_support import assert_same_as_emulator, need_compiler, copy_args
from polypy.driver.library import build_library, emit_kernels
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.emulator import emulate

SOURCE = r"""
__global__ void count(const int* x, unsigned* total, unsigned* hist, int n)
{
    __shared__ unsigned s;
    if (threadIdx.x == 0) s = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] > 0) {
        atomicAdd(&s, 1u);
        atomicAdd(&hist[x[i] % 4], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(&total[2], s);
}

__global__ void fsum(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&out[0], x[i]);
}
"""


def _kernel(name: str):
    return load(None, text=SOURCE).kernel(name)


def test_only_parameters_added_to_at_one_constant_element_are_summed_per_worker():
    text = emit_kernels([to_cpu(_kernel("count"))])
    assert "Sums per worker (total:" in text
    assert "(void)polypy_atomic_add_u32(&total[2], polypy_sum_" in text
    assert "hist:" not in text  # `hist[x[i] % 4]`: not one element
    checked = emit_kernels([to_cpu(_kernel("count"))], check_bounds=True)
    assert "Sums per worker" not in checked  # the bounds checker sees the arrays themselves


def test_launch_policy_of_a_kernel_alone():
    """``codegen.c.launch_policy``: the parameters summed per worker (index, element, type), and when
    a launch runs on the calling thread (a loop-free kernel: also a small grid; a team of one only
    where the thread count is the runtime's)."""
    from codegen.c.launch_policy import runs_alone, worker_sums
    count, fsum = to_cpu(_kernel("count")), to_cpu(_kernel("fsum"))
    assert [(i, slot, t.name) for i, slot, t in worker_sums(count)] == [(1, 2, "u32")]
    assert [(i, slot, t.name) for i, slot, t in worker_sums(fsum)] == [(1, 0, "f32")]
    alone, why = runs_alone(fsum, 0)
    assert "POLYPY_RT_SMALL_GRID_WORK" in alone and alone.endswith("|| POLYPY_WORKERS() <= 1")
    assert why.startswith("one block, or (a kernel without loops") and why.endswith("a team of one thread")
    alone, why = runs_alone(fsum, 4)
    assert "POLYPY_WORKERS" not in alone and "team of one" not in why


@pytest.mark.parametrize("grid,block", [(1, 64), (7, 32), (40, 128)])
def test_integer_sums_are_exact(grid, block):
    size = grid * block - 5
    rng = np.random.default_rng(grid)
    args = {"x": rng.integers(-3, 9, size, dtype=np.int32), "total": np.arange(4, dtype=np.uint32),
            "hist": np.zeros(4, np.uint32), "n": size}
    got = assert_same_as_emulator(_kernel("count"), grid, block, args)
    assert got["total"][2] == 2 + int((args["x"] > 0).sum())


@pytest.mark.parametrize("n", [0, 1000])
def test_float_sums_match_the_emulator_and_an_empty_sum_changes_nothing(n):
    """A worker's copy starts at -0.0, the identity of float addition (x + -0.0 == x for every x)."""
    need_compiler(False)
    size, grid, block = 1000, 16, 64
    args = {"x": np.random.default_rng(4).random(size, dtype=np.float32),
            "out": np.array([-0.0 if n == 0 else 1.5], np.float32), "n": n}
    want = copy_args(args)
    emulate(_kernel("fsum"), grid, block, want)
    got = copy_args(args)
    build_library([to_cpu(_kernel("fsum"))], threads=2).launch("fsum", grid, block, got)
    np.testing.assert_allclose(got["out"], want["out"], rtol=1e-5)
