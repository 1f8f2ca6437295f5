"""Thread loops fused across a barrier in an order of the threads (``gpu2cpu.fuse_thread_loops``
with ``BarrierAnalysis.crossing_order``): where a thread of the second loop only touches what
threads before it (or only after it) touched in the first, the two loops run as one, thread by
thread in that order, and the loop is ``ordered``: no later pass distributes, interchanges or
vectorizes it as if its iterations were independent. Structure in the CPU IR, values against
the emulator through C (generic, specialized and coarse versions) and the LLVM JIT.
"""
from __future__ import annotations

import numpy as np
import pytest
from c_support import assert_same_as_emulator, copy_args, need_compiler
from test_llvm_support import compile_cpu, run_compiled

import polypy
from polypy.driver.library import build_library
from codegen.lanes import vector_loop
from gpu2cpu.distribute_thread_loops import fission_chunks
from polypy.driver.coarsen import block_coarsener
from polypy.driver.pipelines import to_cpu
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir import parse_kernel, print_ir
from polypy.ir.visitor import walk

# A Hillis-Steele scan of each block's elements, written anew: step `offset` reads the element
# `offset` places before, then (after a barrier) adds it. The thread reading `s[tid - offset]`
# comes after the one writing it: the two loops run as one from the last thread to the first.
SCAN = r"""
__global__ void scan(const float* in, float* out, int n)
{
    __shared__ float s[1024];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    s[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset *= 2) {
        float t = tid >= offset ? s[tid - offset] : 0.0f;
        __syncthreads();
        s[tid] += t;
        __syncthreads();
    }
    if (i < n)
        out[i] = s[tid];
}
"""

# Thread 0 of each row of the block loads the row's scale; every thread of the row then uses
# it: the reading threads come after the writing one (ascending order). (Without __restrict__,
# `y` might be `scale`: a thread's store could then reach what a later thread loads first.)
ROW_SCALE = r"""
__global__ void row_scale(const float* __restrict__ scale, const float* __restrict__ x, float* __restrict__ y,
                          int width)
{
    __shared__ float k[32];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * blockDim.y + ty;
    if (tx == 0)
        k[ty] = scale[row];
    __syncthreads();
    y[row * width + blockIdx.x * blockDim.x + tx] = k[ty] * x[row * width + blockIdx.x * blockDim.x + tx];
}
"""

# Each thread reads both neighbours: threads before and after it. No order fits: two loops.
BOTH_WAYS = r"""
__global__ void smooth(const float* in, float* out)
{
    __shared__ float s[256];
    int tx = threadIdx.x;
    s[tx] = in[blockIdx.x * blockDim.x + tx];
    __syncthreads();
    float t = s[tx] + (tx > 0 ? s[tx - 1] : 0.0f) + (tx + 1 < blockDim.x ? s[tx + 1] : 0.0f);
    __syncthreads();
    s[tx] = t;
    __syncthreads();
    out[blockIdx.x * blockDim.x + tx] = s[(tx + 1) % blockDim.x];
}
"""


def _kernel(text: str, name: str) -> n.Kernel:
    return polypy.load(None, text=text).kernel(name)


def _ordered(kernel: n.Kernel) -> list[n.For]:
    return [x for x in walk(kernel) if isinstance(x, n.For) and x.ordered]


def _report(kernel: n.Kernel) -> str:
    decisions: list = []
    to_cpu(kernel, report=decisions)
    return "\n".join(d.format() for d in decisions)


def test_a_scan_step_runs_as_one_loop_from_the_last_thread():
    kernel = _kernel(SCAN, "scan")
    cpu = to_cpu(kernel)
    loops = _ordered(cpu)
    assert loops, "the scan's two loops per step are fused"
    # Counted backwards: the body indexes the shared array at blockDim.x - 1 - tx.
    reversed_x = n.Binary("sub", n.Binary("sub", n.BlockDim(0), n.Const(1, n.U32)), n.Var("tx", n.U32))
    assert any(x == reversed_x or (isinstance(x, n.Binary) and x.op == "sub" and x.b.type == n.U32
                                   and isinstance(x.b, n.Var) and x.b.name.startswith("tx")
                                   and x.a == n.Binary("sub", n.BlockDim(0), n.Const(1, n.U32)))
               for loop in loops for x in walk(loop))
    report = _report(kernel)
    assert "fused, threads in descending order" in report
    assert "offset >= 1" in report and "blockDim.z == 1u" in report and "tested at run time" in report


def test_ordered_loops_are_neither_vectorized_nor_distributed_nor_interchanged():
    cpu = to_cpu(_kernel(SCAN, "scan"))
    reading = 0
    for loop in _ordered(cpu):
        assert loop.kind == "threads"
        assert fission_chunks(cpu, loop) == []
        # A loop that reads s where an earlier iteration wrote is no vector loop; the range of
        # threads whose select took 0 (no read at tid - offset) touches s at its own index only
        # and may be one (codegen.lanes.disjoint_iterations).
        indices = {x.index for x in walk(loop) if isinstance(x, (n.Load, n.Store)) and x.buffer == "s"}
        if len(indices) > 1:
            reading += 1
            assert vector_loop(cpu, loop) is None
    assert reading
    text = print_ir(cpu)
    assert "for threads(ordered) " in text


def test_ordered_loops_print_and_parse_back():
    text = """kernel k(x: f32*) {
  shared s: f32[64]
  for threads(ordered) tx: u32 = 0u to 64u step 1u {
    s[63u - tx] = x[tx]
  }
}"""
    kernel = parse_kernel(text)
    loop = next(x for x in walk(kernel) if isinstance(x, n.For))
    assert loop.ordered and loop.kind == "threads"
    assert print_ir(kernel).strip() == text.strip()


def _scan_want(x: np.ndarray, block: int) -> np.ndarray:
    out = np.empty_like(x)
    for b in range(0, len(x), block):
        out[b:b + block] = np.cumsum(x[b:b + block], dtype=np.float64).astype(np.float32)
    return out


@pytest.mark.parametrize("block", [32, 64, 256, 1024])
def test_scan_matches_the_emulator(block):
    """Specialized versions (one per block shape) fold the run-time test of the fused loops."""
    kernel = _kernel(SCAN, "scan")
    rng = np.random.default_rng(1)
    threads = block
    for n_items in (3 * threads, 2 * threads + 5):
        grid = ((n_items + threads - 1) // threads,)
        x = rng.integers(-4, 5, n_items).astype(np.float32)
        got = assert_same_as_emulator(kernel, grid, (block,), {"in": x, "out": np.zeros(n_items, np.float32),
                                                           "n": n_items})
        np.testing.assert_array_equal(got["out"], _scan_want(x, threads))


def test_scan_in_coarse_blocks_and_through_llvm():
    """Blocks of 32 run coarsened (128 threads, 4 sub-blocks with a slice of `s` each); the last
    coarse block of a row is partial. And the LLVM JIT runs the ordered loops too."""
    need_compiler()
    module = polypy.load(None, text=SCAN)
    kernel = module.kernel("scan")
    lib = build_library([to_cpu(kernel)], module.globals, block_shapes={"scan": [(32, 1, 1)]},
                        coarsen=block_coarsener(module, factor=4), specialize=False)
    jit = compile_cpu(to_cpu(kernel))
    rng = np.random.default_rng(2)
    for n_items in (32 * 9, 32 * 6 + 7):
        grid = ((n_items + 31) // 32,)
        args = {"in": rng.integers(-4, 5, n_items).astype(np.float32), "out": np.zeros(n_items, np.float32),
                "n": n_items}
        want = copy_args(args)
        emulate(kernel, grid, (32,), want)
        got = copy_args(args)
        lib.launch("scan", grid, (32,), got)
        np.testing.assert_array_equal(got["out"], want["out"])
        got = copy_args(args)
        run_compiled(jit, "scan", grid, (32,), got)
        np.testing.assert_array_equal(got["out"], want["out"])


def test_a_value_one_thread_loads_for_its_row_fuses_in_ascending_order():
    kernel = _kernel(ROW_SCALE, "row_scale")
    assert _ordered(to_cpu(kernel))
    report = _report(kernel)
    assert "fused, threads in ascending order" in report and "blockDim.z == 1u" in report
    rng = np.random.default_rng(3)
    for block in ((16, 8), (32, 4), (8, 1)):
        rows = 2 * block[1]
        width = 3 * block[0]
        grid = (3, rows // block[1])
        args = {"scale": rng.standard_normal(rows).astype(np.float32),
                "x": rng.standard_normal(rows * width).astype(np.float32),
                "y": np.zeros(rows * width, np.float32), "width": width}
        got = assert_same_as_emulator(kernel, grid, block, args)
        np.testing.assert_array_equal(got["y"].reshape(rows, width),
                                      args["scale"][:, None] * args["x"].reshape(rows, width))


# Every thread stages its value; each then reads its south and east neighbours' (Rodinia
# srad_v2's srad_cuda_2, smaller): descending order would do, one thread at a time over rows of
# threads; the two loops stay apart and vectorize along x.
NEIGHBOURS = r"""
#define B 8
__global__ void south_east(const float* __restrict__ c, float* __restrict__ out, int cols)
{
    __shared__ float t[B + 1][B + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = (blockIdx.y * B + ty) * cols + blockIdx.x * B + tx;
    t[ty][tx] = c[i];
    __syncthreads();
    float s = ty == B - 1 ? 0.0f : t[ty + 1][tx];
    float e = tx == B - 1 ? 0.0f : t[ty][tx + 1];
    out[i] = t[ty][tx] + 2.0f * s + 3.0f * e;
}
"""


def test_rows_of_threads_reading_what_every_thread_wrote_keep_their_loops_apart():
    kernel = _kernel(NEIGHBOURS, "south_east")
    assert not _ordered(to_cpu(kernel))
    assert "not fused: they could run as one only with the threads in descending order" in _report(kernel)
    rng = np.random.default_rng(6)
    for blocks in ((1, 1), (3, 2)):
        cols = 8 * blocks[0]
        c = rng.standard_normal(cols * 8 * blocks[1]).astype(np.float32)
        got = assert_same_as_emulator(kernel, blocks, (8, 8), {"c": c, "out": np.zeros_like(c), "cols": cols})
        t = c.reshape(8 * blocks[1], cols)
        south = np.zeros_like(t)
        east = np.zeros_like(t)
        for r in range(t.shape[0]):
            for k in range(cols):
                south[r, k] = 0.0 if r % 8 == 7 else t[r + 1, k]
                east[r, k] = 0.0 if k % 8 == 7 else t[r, k + 1]
        np.testing.assert_allclose(got["out"].reshape(t.shape), t + 2.0 * south + 3.0 * east, rtol=1e-6)


def test_threads_reading_both_neighbours_keep_their_loops_apart():
    kernel = _kernel(BOTH_WAYS, "smooth")
    assert not _ordered(to_cpu(kernel))
    assert " order" not in _report(kernel)
    rng = np.random.default_rng(4)
    for block in (32, 256):
        args = {"in": rng.standard_normal(3 * block).astype(np.float32), "out": np.zeros(3 * block, np.float32)}
        assert_same_as_emulator(kernel, (3,), (block,), args)


def test_without_restrict_a_store_may_reach_what_a_later_thread_loads_first():
    """`y` might be `scale`: thread (1, 0)'s store to `y` could land where thread (0, 1) loads
    `scale` first, so neither order fits (the loops stay apart), and the results stay exact."""
    text = ROW_SCALE.replace("__restrict__ ", "")
    kernel = _kernel(text, "row_scale")
    assert not _ordered(to_cpu(kernel))
    rng = np.random.default_rng(5)
    args = {"scale": rng.standard_normal(8).astype(np.float32), "x": rng.standard_normal(8 * 96).astype(np.float32),
            "y": np.zeros(8 * 96, np.float32), "width": 96}
    assert_same_as_emulator(kernel, (3, 2), (32, 4), args)


# Rodinia b+tree's findK, written anew: each level, the thread whose interval holds the block's key
# picks the child; after a barrier thread 0 moves the block there. Thread 0's statement must come
# after every thread's comparison: fused, the whole loop would run backwards for one statement.
DESCEND = r"""
__global__ void descend(const int* keys, const int* key, long* cur, long* next, int levels, int width)
{
    int t = threadIdx.x, b = blockIdx.x;
    for (int i = 0; i < levels; i++) {
        if (keys[cur[b] * width + t] <= key[b] && keys[cur[b] * width + t + 1] > key[b])
            next[b] = (cur[b] * width + t) % 7;
        __syncthreads();
        if (t == 0)
            cur[b] = next[b];
        __syncthreads();
    }
}
"""


def test_one_threads_statement_after_a_loop_keeps_the_loop_ascending():
    kernel = _kernel(DESCEND, "descend")
    cpu = to_cpu(kernel)
    assert not _ordered(cpu)
    assert "not fused: they could run as one only with the threads in descending order, and the second runs " \
           "only for one thread of each row" in _report(kernel)
    # the first loop is a plain loop over every thread, counted forwards; thread 0's alone after it
    loops = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads" and x.var.startswith("tx")]
    assert any(x.stop == n.BlockDim(0) for x in loops) and any(x.stop == n.Const(1, n.U32) for x in loops)
    rng = np.random.default_rng(7)
    for block in (8, 32):
        width = block + 1
        keys = np.tile(np.arange(width, dtype=np.int32) * 3, 7)
        args = {"keys": keys, "key": rng.integers(0, 3 * block, 5).astype(np.int32),
                "cur": rng.integers(0, 7, 5).astype(np.int64), "next": np.zeros(5, np.int64), "levels": 3,
                "width": width}
        assert_same_as_emulator(kernel, (5,), (block,), args)
