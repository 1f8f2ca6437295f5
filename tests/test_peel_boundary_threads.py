"""tighten-thread-bounds, step 2b: the if/else chains of a boundary stencil (the shape of
Rodinia srad's `ty == 0 && tx == 0`, ..., `tx == 15` cases, written anew) are decided by the
range of the thread counter in one go -- one loop per range between the chains' constant bounds
-- and a chain left with conditions on the other counters only is unswitched in the long ranges,
so that the middle range is one branch-free loop. Checked: the report, the shape of the CPU form,
and the results against the emulator through C and LLVM on several grids."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import assert_same_as_emulator
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.visitor import walk, walk_block

EDGES = r"""
#define B 16
__global__ void edges(const float* in, float* out, int w)
{
    __shared__ float t[B][B];
    int tx = threadIdx.x, ty = threadIdx.y;
    int x = blockIdx.x * B + tx, y = blockIdx.y * B + ty;
    t[ty][tx] = in[y * w + x];
    __syncthreads();
    float c = t[ty][tx];
    float nn, ss, ee, ww;
    if (ty == 0 && tx == 0) {
        nn = c; ss = t[ty + 1][tx]; ww = c; ee = t[ty][tx + 1];
    } else if (ty == 0 && tx == B - 1) {
        nn = c; ss = t[ty + 1][tx]; ww = t[ty][tx - 1]; ee = c;
    } else if (ty == B - 1 && tx == 0) {
        nn = t[ty - 1][tx]; ss = c; ww = c; ee = t[ty][tx + 1];
    } else if (ty == B - 1 && tx == B - 1) {
        nn = t[ty - 1][tx]; ss = c; ww = t[ty][tx - 1]; ee = c;
    } else if (ty == 0) {
        nn = c; ss = t[ty + 1][tx]; ww = t[ty][tx - 1]; ee = t[ty][tx + 1];
    } else if (ty == B - 1) {
        nn = t[ty - 1][tx]; ss = c; ww = t[ty][tx - 1]; ee = t[ty][tx + 1];
    } else if (tx == 0) {
        nn = t[ty - 1][tx]; ss = t[ty + 1][tx]; ww = c; ee = t[ty][tx + 1];
    } else if (tx == B - 1) {
        nn = t[ty - 1][tx]; ss = t[ty + 1][tx]; ww = t[ty][tx - 1]; ee = c;
    } else {
        nn = t[ty - 1][tx]; ss = t[ty + 1][tx]; ww = t[ty][tx - 1]; ee = t[ty][tx + 1];
    }
    out[y * w + x] = 0.25f * (nn + ss + ee + ww) - c;
}
"""


def _kernel() -> n.Kernel:
    return load(None, text=EDGES).kernel("edges")


def test_the_chain_is_decided_per_range_and_the_middle_range_is_branch_free():
    report: list = []
    cpu = to_cpu(_kernel(), report=report)
    lines = [d.message for d in report if "decided by its range, one loop per range" in getattr(d, "message", "")]
    assert lines and "[0, 1), [1, 15), [15, 16)" in lines[0], lines
    # No range of a loop that is empty or short is peeled again.
    assert not any("[16, 0u)" in line for line in lines), lines
    middle = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads" and x.var.startswith("tx")
              and "min(1u, blockDim.x)" in format_expr(x.start)]
    assert middle, "no loop over the interior threads 1..14"
    # Each interior loop holds one branch of the chain: its `ty` conditions were unswitched.
    assert len(middle) >= 3
    for loop in middle:
        assert not any(isinstance(x, n.If) for x in walk_block(loop.body)), "a branch left in an interior loop"


@pytest.mark.parametrize("grid", [(1, 1), (3, 2), (4, 4)])
def test_results_match_the_emulator_through_c_and_llvm(grid):
    w = grid[0] * 16
    size = w * grid[1] * 16
    rng = np.random.default_rng(grid[0] * 7 + grid[1])
    args = {"in": rng.random(size, dtype=np.float32), "out": np.zeros(size, np.float32), "w": w}
    want = assert_same_as_emulator(_kernel(), grid, (16, 16), args)
    got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    polypy.compile(None, text=EDGES, threads=2)["edges"][grid, (16, 16)](**got)
    np.testing.assert_array_equal(got["out"], want["out"])
