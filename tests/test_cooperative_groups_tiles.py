"""Cooperative groups, continued (docs/cooperative_groups.md): a tile's sync() under control that
differs between the tiles of a block (run like __syncwarp, gpu2cpu.lower_warp_syncs), and tiles
of more than 32 threads. Our own kernels against NumPy through the emulator, the LLVM JIT and the
C backend on several block shapes; located refusals for what stays refused."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from polypy.errors import UserError
from test_cooperative_groups import PRELUDE, _backends

# Only the first 16 threads of each block work, as one tile of 16 (dynamic, a thread_group, or
# static): they rank their 16 values by counting (a stable rank: ties broken by the thread), with
# the tile's sync() between the steps, all under `if (t < 16)`.
RANK16 = PRELUDE + r"""
__device__ void settle(int* rk, TILE tile) {
  for (int i = 0; i < 15; i++) {
    if ((int)threadIdx.x > i && rk[threadIdx.x] == rk[i]) ++rk[threadIdx.x];
    cg::sync(tile);
  }
}
__global__ void rank16(const float* x, float* sorted, int* ranks) {
  __shared__ float vals[16];
  __shared__ int rk[16];
  cg::thread_block cta = cg::this_thread_block();
  TILE tile = MAKE;
  unsigned int t = threadIdx.x;
  if (t < 16) {
    vals[t] = x[blockIdx.x * 16 + t];
    tile.sync();
    int r = 0;
    for (int i = 0; i < 16; i++) r += vals[i] < vals[t];
    rk[t] = r;
    tile.sync();
    settle(rk, tile);
    ranks[blockIdx.x * 16 + t] = rk[t];
    sorted[blockIdx.x * 16 + rk[t]] = vals[t];
  }
}
"""
TILES16 = {"dynamic": ("cg::thread_group", "cg::tiled_partition(cta, 16)"),
           "static": ("cg::thread_block_tile<16>", "cg::tiled_partition<16>(cta)")}


@pytest.mark.parametrize("way", sorted(TILES16))
@pytest.mark.parametrize("block", [16, 32, 64])
def test_a_tiles_sync_under_a_condition_of_the_thread(tmp_path, way, block) -> None:
    tile_type, make = TILES16[way]
    source = RANK16.replace("TILE", tile_type).replace("MAKE", make)
    grid = 3
    rng = np.random.default_rng(block)
    x = rng.integers(0, 6, grid * 16).astype(np.float32)  # ties too
    args = {"x": x, "sorted": np.zeros(grid * 16, np.float32), "ranks": np.zeros(grid * 16, np.int32)}
    want_ranks = np.concatenate([np.argsort(np.argsort(x[b * 16:(b + 1) * 16], kind="stable"), kind="stable")
                                 for b in range(grid)])
    want_sorted = np.concatenate([np.sort(x[b * 16:(b + 1) * 16]) for b in range(grid)])
    for name, got in _backends(tmp_path, source, "rank16", grid, block, args):
        np.testing.assert_array_equal(got["ranks"], want_ranks, err_msg=name)
        np.testing.assert_array_equal(got["sorted"], want_sorted, err_msg=name)


# The tiles of 32 with an odd meta rank exchange values through shared memory, ordered by their
# own tile's sync(); the others skip it all.
ODD_TILES = PRELUDE + r"""
__global__ void odd_tiles(int* x) {
  __shared__ int s[256];
  cg::thread_block_tile<32> t = cg::tiled_partition<32>(cg::this_thread_block());
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (t.meta_group_rank() % 2 == 1) {
    s[threadIdx.x] = x[i] * 10;
    t.sync();
    x[i] = s[threadIdx.x ^ 31] + 1;
  }
}
"""


@pytest.mark.parametrize("block", [64, 128, 256])
def test_tiles_that_sync_while_other_tiles_do_not(tmp_path, block) -> None:
    grid = 2
    x = np.arange(grid * block, dtype=np.int32)
    want = x.copy().reshape(grid, -1, 32)
    want[:, 1::2] = want[:, 1::2, ::-1] * 10 + 1
    for name, got in _backends(tmp_path, ODD_TILES, "odd_tiles", grid, block, {"x": x}):
        np.testing.assert_array_equal(got["x"], want.reshape(-1), err_msg=name)


def test_a_tiles_sync_in_both_branches_of_a_thread_dependent_if_stays_refused(tmp_path) -> None:
    src = tmp_path / "both.cu"
    src.write_text(PRELUDE + "__global__ void k(float* x) {\n"
                   "  cg::thread_block_tile<16> t = cg::tiled_partition<16>(cg::this_thread_block());\n"
                   "  if (t.meta_group_rank() == 0) { x[threadIdx.x] = 1; t.sync(); }\n"
                   "  else { x[threadIdx.x] = 2; t.sync(); }\n"
                   "}\n")
    with pytest.raises(UserError, match="under other conditions than the kernel's first __syncwarp") as info:
        polypy.load(str(src))
    assert (info.value.loc.line, info.value.loc.col) == (6, 30)  # at the second t.sync()


# Tiles of 64 to 256 threads (with and without CUDA's block_tile_memory scratch): ranks, sizes,
# the tile's sync() (a block barrier), cg::reduce with plus, less and greater, shfl from a rank
# (modulo the tile size), any and all.
BIG = PRELUDE + r"""
#include <cooperative_groups/reduce.h>
__global__ void big(const float* x, float* sums, int* mins, int* maxs, int* info, int* shf) {
  SCRATCH
  cg::thread_block_tile<N> tile = cg::tiled_partition<N>(CTA);
  __shared__ int s[256];
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = (int)(x[i] * 10.0f);
  sums[i] = cg::reduce(tile, x[i], cg::plus<float>());
  mins[i] = cg::reduce(tile, v, cg::less<int>());
  maxs[i] = cg::reduce(tile, v, cg::greater<int>());
  s[threadIdx.x] = v;
  tile.sync();
  info[i] = tile.thread_rank() + 1000 * tile.meta_group_rank() + 100000 * tile.meta_group_size()
            + 10000000 * (s[threadIdx.x ^ (N - 1)] == (int)(x[i ^ (N - 1)] * 10.0f));
  shf[i] = tile.shfl(v, tile.thread_rank() * 7 + 3 + tile.size()) + 1000 * tile.any(v > 38) + 10000 * tile.all(v > -40)
           + 100000 * tile.all(v > -39);
}
"""


@pytest.mark.parametrize("scratch, N, block", [(True, 64, 64), (False, 64, 256), (True, 128, 256),
                                               (False, 256, 256)])
def test_tiles_of_more_than_32_threads(tmp_path, scratch, N, block) -> None:
    if scratch:
        source = BIG.replace("SCRATCH", "__shared__ cg::block_tile_memory<256> scratch;\n  "
                             "cg::thread_block cta = cg::this_thread_block(scratch);").replace("CTA", "cta")
    else:
        source = BIG.replace("SCRATCH", "").replace("CTA", "cg::this_thread_block()")
    source = source.replace("<N>", f"<{N}>").replace("(N - 1)", f"({N} - 1)")
    grid = 2
    rng = np.random.default_rng(N + block)
    x = rng.uniform(-4, 4, grid * block).astype(np.float32)
    args = {"x": x, "sums": np.zeros_like(x), "mins": np.zeros(x.size, np.int32), "maxs": np.zeros(x.size, np.int32),
            "info": np.zeros(x.size, np.int32), "shf": np.zeros(x.size, np.int32)}
    tiles = x.reshape(-1, N)
    v = (x * np.float32(10)).astype(np.int32).reshape(-1, N)
    t = np.arange(x.size) % block
    want_info = t % N + 1000 * (t // N) + 100000 * (block // N) + 10000000
    r = np.arange(N)
    want_shf = (v[:, (r * 7 + 3) % N] + 1000 * (v > 38).any(axis=1, keepdims=True)
                + 10000 * (v > -40).all(axis=1, keepdims=True) + 100000 * (v > -39).all(axis=1, keepdims=True))
    for name, got in _backends(tmp_path, source, "big", grid, block, args):
        sums = got["sums"].reshape(-1, N)
        # Every thread of a tile gets the same bits; the sum is the tile's (float: in some order).
        assert (sums == sums[:, :1]).all(), name
        np.testing.assert_allclose(sums[:, 0], tiles.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4,
                                   err_msg=name)
        np.testing.assert_array_equal(got["mins"].reshape(-1, N), np.repeat(v.min(axis=1, keepdims=True), N, 1),
                                      err_msg=name)
        np.testing.assert_array_equal(got["maxs"].reshape(-1, N), np.repeat(v.max(axis=1, keepdims=True), N, 1),
                                      err_msg=name)
        np.testing.assert_array_equal(got["info"], want_info, err_msg=name)
        np.testing.assert_array_equal(got["shf"], want_shf.reshape(-1), err_msg=name)


# shfl_up/down/xor and ballot of a tile of more than 32 threads stay refused (located, naming them);
# so do tiles that are not a power of two or bigger than a block can be, and a big tile's sync()
# or shfl under a condition that differs between threads (block barriers).
BIG_REFUSED = [
    ("x[0] = t.shfl_xor(x[1], 1);", "thread_block_tile<64>::shfl_xor: shfl_up, shfl_down, shfl_xor and ballot"),
    ("x[0] = t.ballot(x[1] > 0);", "thread_block_tile<64>::ballot: shfl_up, shfl_down, shfl_xor and ballot"),
    ("if (threadIdx.x < 64) x[0] = t.shfl(x[1], 0);", "every thread of the block must reach it"),
    ("if (threadIdx.x < 64) t.sync();", "every thread of the block must reach it"),
]


@pytest.mark.parametrize("body, message", BIG_REFUSED)
def test_what_tiles_of_more_than_32_threads_refuse(tmp_path, body, message) -> None:
    src = tmp_path / "big_refused.cu"
    src.write_text(PRELUDE + "__global__ void k(int* x) {\n"
                   "  cg::thread_block_tile<64> t = cg::tiled_partition<64>(cg::this_thread_block());\n  "
                   + body + "\n}\n")
    with pytest.raises(UserError, match=message.replace("(", "\\(").replace(")", "\\)")) as info:
        polypy.load(str(src))
    assert info.value.loc is not None and info.value.loc.line == 5


@pytest.mark.parametrize("size", [48, 2048])
def test_tile_sizes_that_are_not_a_power_of_two_up_to_1024_are_refused(tmp_path, size) -> None:
    src = tmp_path / "size.cu"
    src.write_text(PRELUDE + "__global__ void k(int* x) {\n"
                   f"  x[0] = cg::tiled_partition<{size}>(cg::this_thread_block()).size();\n}}\n")
    with pytest.raises(UserError, match=f"tiled_partition<{size}>: the size of a tile must be a power of two") as info:
        polypy.load(str(src))
    assert info.value.loc.line == 4


@pytest.mark.parametrize("parent, kind", [("cg::this_grid()", "grid_group"),
                                          ("cg::coalesced_threads()", "coalesced_group")])
def test_tiles_of_a_grid_or_a_coalesced_group_are_refused(tmp_path, parent, kind) -> None:
    src = tmp_path / "parent.cu"
    src.write_text(PRELUDE + "__global__ void k(int* x) {\n"
                   f"  x[0] = cg::tiled_partition<4>({parent}).thread_rank();\n}}\n")
    with pytest.raises(UserError, match=f"tiled_partition of a {kind} is not supported") as info:
        polypy.load(str(src))
    assert info.value.loc.line == 4


# The grid group's ranks and sizes (no grid-wide sync): a grid-stride loop over n elements, and
# each thread's block rank, block count and block index checked against threadIdx/blockIdx.
GRID = PRELUDE + r"""
__global__ void grid_ranks(const int* x, int* y, unsigned long long* info, int n) {
  cg::grid_group grid = cg::this_grid();
  for (unsigned long long i = grid.thread_rank(); i < n; i += grid.size()) y[i] = 2 * x[i] + 1;
  unsigned long long r = cg::thread_rank(grid);
  dim3 b = grid.block_index(), g = grid.dim_blocks();
  info[3 * r] = grid.block_rank() + 1000 * grid.num_blocks();
  info[3 * r + 1] = b.x + 10 * b.y + 100 * g.x + 1000 * g.y;
  info[3 * r + 2] = cg::group_size(grid) - grid.num_threads() + (grid.thread_rank() - 70 > r);
}
"""


@pytest.mark.parametrize("grid, block", [(3, 64), ((2, 3), (8, 4)), (5, 48)])
def test_grid_group_ranks_and_sizes(tmp_path, grid, block) -> None:
    gx, gy = (grid, 1) if isinstance(grid, int) else grid
    bx, by = (block, 1) if isinstance(block, int) else block
    threads = gx * gy * bx * by
    n = 1000
    x = np.arange(n, dtype=np.int32) * 3 - 500
    args = {"x": x, "y": np.zeros(n, np.int32), "info": np.zeros(3 * threads, np.uint64), "n": n}
    r = np.arange(threads, dtype=np.uint64)
    brank = r // np.uint64(bx * by)
    want = np.stack([brank + 1000 * gx * gy, brank % gx + 10 * (brank // gx) + 100 * gx + 1000 * gy,
                     (r < 70).astype(np.uint64)], axis=1).reshape(-1)  # rank - 70 wraps in 64 bits below 70
    for name, got in _backends(tmp_path, GRID, "grid_ranks", grid, block, args):
        np.testing.assert_array_equal(got["y"], 2 * x + 1, err_msg=name)
        np.testing.assert_array_equal(got["info"], want, err_msg=name)


# coalesced_threads() inside a branch some lanes of a warp take: the warp-aggregated atomic
# increment (the leader adds the group's size, broadcasts the old value, each thread takes its
# rank's slot), ranks, sizes, votes and a shuffle from the last rank.
COALESCED = PRELUDE + r"""
__global__ void coalesced(const int* x, int* counter, int* slot, int* info) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[i];
  if (v % 3 != 0) {
    cg::coalesced_group g = cg::coalesced_threads();
    int base = 0;
    if (g.thread_rank() == 0) base = atomicAdd(counter, g.size());
    base = g.shfl(base, 0);
    slot[i] = base + g.thread_rank();
    info[i] = g.thread_rank() + 100 * g.size() + 10000 * g.any(v > 90) + 100000 * g.all(v > 0)
              + 1000000 * g.shfl(v, g.size() - 1) + 1000 * (g.meta_group_rank() + g.meta_group_size());
  }
}
"""


@pytest.mark.parametrize("block", [64, 48, 256])
def test_coalesced_threads_in_a_branch(tmp_path, block) -> None:
    grid = 2
    rng = np.random.default_rng(block)
    x = rng.integers(-20, 100, grid * block).astype(np.int32)
    args = {"x": x, "counter": np.zeros(1, np.int32), "slot": np.full(x.size, -1, np.int32),
            "info": np.full(x.size, -1, np.int32)}
    taken = x % 3 != 0
    want_info = np.full(x.size, -1, np.int64)
    warps = []
    for b in range(grid):
        for w0 in range(0, block, 32):
            lanes = np.arange(b * block + w0, b * block + min(w0 + 32, block))
            members = lanes[taken[lanes]]
            if members.size == 0:
                continue
            warps.append(members)
            v = x[members].astype(np.int64)
            want_info[members] = (np.arange(members.size) + 100 * members.size + 10000 * (v > 90).any()
                                  + 100000 * (v > 0).all() + 1000000 * v[-1] + 1000)
    for name, got in _backends(tmp_path, COALESCED, "coalesced", grid, block, args):
        assert got["counter"][0] == taken.sum(), name
        np.testing.assert_array_equal(got["info"], want_info.astype(np.int32), err_msg=name)
        np.testing.assert_array_equal(got["slot"][~taken], -1, err_msg=name)
        assert sorted(got["slot"][taken]) == list(range(taken.sum())), name
        for members in warps:  # each group's slots: consecutive, in rank order
            s = got["slot"][members]
            np.testing.assert_array_equal(s, s[0] + np.arange(members.size), err_msg=name)


COALESCED_REFUSED = [
    ("x[0] = g.meta_group_rank() + g.shfl_xor(x[1], 1);", "no member named 'shfl_xor'"),
    ("x[0] = cg::reduce(g, x[1], cg::plus<float>());", "an operator of another type than the value"),
    ("for (int j = 0; j < x[threadIdx.x]; j++) x[0] += g.size();", "warp operation inside a loop whose trip count"),
]


@pytest.mark.parametrize("body, message", COALESCED_REFUSED)
def test_what_coalesced_groups_refuse(tmp_path, body, message) -> None:
    src = tmp_path / "coalesced_refused.cu"
    if "for (" in body:  # coalesced_threads() itself in a loop whose trips differ between threads, left by a
        # break under a condition of the thread (without the break it runs: tests/test_partitions.py)
        body = "for (int j = 0; j < x[threadIdx.x]; j++) { if (x[j] < 0) break; " \
               "cg::coalesced_group h = cg::coalesced_threads(); x[threadIdx.x] += h.size(); }"
    src.write_text(PRELUDE + "#include <cooperative_groups/reduce.h>\n__global__ void k(int* x) {\n"
                   "  cg::coalesced_group g = cg::coalesced_threads();\n  " + body + "\n}\n")
    with pytest.raises(UserError, match=message.replace("(", "\\(").replace(")", "\\)")) as info:
        polypy.compile(str(src))
    assert info.value.loc is not None and info.value.loc.line == 6


# cg::reduce over a coalesced group (the lanes of a warp in a branch): every member gets the
# members' sum (float: in some order; all members the same bits), minimum and maximum.
COALESCED_REDUCE = PRELUDE + r"""
#include <cooperative_groups/reduce.h>
__global__ void coalesced_reduce(const float* x, float* sums, int* mins, int* maxs) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  if (v > 0.0f) {
    cg::coalesced_group g = cg::coalesced_threads();
    sums[i] = cg::reduce(g, v, cg::plus<float>());
    mins[i] = cg::reduce(g, (int)(v * 10.0f), cg::less<int>());
    maxs[i] = cg::reduce(g, (int)(v * 10.0f), cg::greater<int>());
  }
}
"""


@pytest.mark.parametrize("block", [64, 48])
def test_reduce_over_a_coalesced_group(tmp_path, block) -> None:
    grid = 2
    rng = np.random.default_rng(block + 1)
    x = rng.uniform(-3, 5, grid * block).astype(np.float32)
    args = {"x": x, "sums": np.zeros_like(x), "mins": np.zeros(x.size, np.int32), "maxs": np.zeros(x.size, np.int32)}
    taken = x > 0
    groups = []
    for b in range(grid):
        for w0 in range(0, block, 32):
            lanes = np.arange(b * block + w0, b * block + min(w0 + 32, block))
            if taken[lanes].any():
                groups.append(lanes[taken[lanes]])
    for name, got in _backends(tmp_path, COALESCED_REDUCE, "coalesced_reduce", grid, block, args):
        for members in groups:
            v = (x[members] * np.float32(10)).astype(np.int32)
            s = got["sums"][members]
            assert (s == s[0]).all(), name
            np.testing.assert_allclose(s[0], x[members].astype(np.float64).sum(), rtol=1e-5, err_msg=name)
            np.testing.assert_array_equal(got["mins"][members], v.min(), err_msg=name)
            np.testing.assert_array_equal(got["maxs"][members], v.max(), err_msg=name)
        np.testing.assert_array_equal(got["sums"][~taken], 0, err_msg=name)
