"""Cooperative groups inside a block (polypy's <cooperative_groups.h>, frontend/lower/cooperative.py):
our own kernels checked against NumPy through the emulator, the LLVM JIT and the C backend, on
several block shapes; located refusals for a grid's sync() under divergent control, partitions of other groups than CUDA's and what
else is not supported."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import run_c, run_emulated
from polypy.errors import UserError

PRELUDE = "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"

# Per warp sums with tile shuffles, then the warps' sums combined through shared memory after a
# block sync (the usual shape of a block reduction).
BLOCK_SUM = PRELUDE + r"""
__global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float partial[32];
  cg::thread_block cta = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(cta);
  unsigned int i = blockIdx.x * blockDim.x + cta.thread_rank();
  float v = i < n ? x[i] : 0.0f;
  for (int o = tile.size() / 2; o > 0; o /= 2) v += tile.shfl_down(v, o);
  if (tile.thread_rank() == 0) partial[tile.meta_group_rank()] = v;
  cg::sync(cta);
  if (cta.thread_rank() == 0) {
    float s = 0.0f;
    for (unsigned int w = 0; w < tile.meta_group_size(); ++w) s += partial[w];
    out[blockIdx.x] = s;
  }
}
"""

# cg::reduce over tiles of N threads with the three operators; every thread writes what it got.
REDUCE = PRELUDE + r"""
__global__ void tile_reduce(const float* x, float* sums, float* mins, float* maxs, int* isums) {
  cg::thread_block cta = cg::this_thread_block();
  cg::thread_block_tile<%(N)d> tile = cg::tiled_partition<%(N)d>(cta);
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  sums[i] = cg::reduce(tile, v, cg::plus<float>());
  mins[i] = cg::reduce(tile, v, cg::less<float>());
  maxs[i] = cg::reduce(tile, v, cg::greater<float>());
  isums[i] = cg::reduce(tile, (int)(v * 100.0f), cg::plus<int>());
}
"""

# Ranks, sizes, votes and the four shuffles of a tile of N threads.
TILE_OPS = PRELUDE + r"""
__global__ void tile_ops(const int* x, int* rank, int* meta, int* votes, unsigned int* ballots, int* shf) {
  cg::thread_block cta = cg::this_thread_block();
  cg::thread_block_tile<%(N)d> tile = cg::tiled_partition<%(N)d>(cta);
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[i];
  rank[i] = tile.thread_rank() + 100 * tile.size();
  meta[i] = tile.meta_group_rank() + 1000 * tile.meta_group_size();
  votes[i] = tile.any(v > 5) + 2 * tile.all(v > 0);
  ballots[i] = tile.ballot(v %% 2 == 1);
  shf[4 * i] = tile.shfl(v, 1);
  shf[4 * i + 1] = tile.shfl_up(v, 1);
  shf[4 * i + 2] = tile.shfl_down(v, 2);
  shf[4 * i + 3] = tile.shfl_xor(v, 1);
}
"""

# A tile of a tile, and a dynamic partition whose size is a constant.
NESTED = PRELUDE + r"""
__global__ void nested(int* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  cg::thread_block_tile<4> quad = cg::tiled_partition<4>(warp);
  cg::thread_group g = cg::tiled_partition(block, 8);
  unsigned int i = blockIdx.x * blockDim.x + block.thread_rank();
  out[4 * i] = quad.thread_rank() + 10 * quad.meta_group_rank() + 1000 * quad.meta_group_size();
  out[4 * i + 1] = g.thread_rank() + 100 * g.size();
  out[4 * i + 2] = block.size();
  out[4 * i + 3] = cg::reduce(quad, (int)block.thread_rank(), cg::greater<int>());
}
"""


def _backends(tmp_path, source: str, kernel: str, grid: int, block: int, args: dict) -> list[tuple[str, dict]]:
    """The arrays after the kernel, from the emulator, the LLVM JIT and the C backend."""
    path = tmp_path / f"{kernel}.cu"
    path.write_text(source)
    gpu = polypy.load(str(path)).kernel(kernel)
    results = [("emulator", run_emulated(gpu, grid, block, args))]
    mod = polypy.compile(str(path))
    llvm = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    getattr(mod, kernel)[grid, block](*llvm.values())
    results.append(("llvm", llvm))
    results.append(("c", run_c(gpu, grid, block, args)))
    return results


def _ranks(nthreads: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(nthreads)
    return i, i % block


@pytest.mark.parametrize("block", [32, 64, 256, 48])
def test_block_sum_with_tile_shuffles_and_block_sync(tmp_path, block) -> None:
    rng = np.random.default_rng(block)
    grid, n = 3, 3 * block - 5
    x = rng.standard_normal(3 * block).astype(np.float32)
    args = {"x": x, "out": np.zeros(grid, np.float32), "n": n}
    want = np.array([x[b * block:min((b + 1) * block, n)].astype(np.float64).sum() for b in range(grid)])
    if block % 32:
        # The last warp of a 48-thread block has 16 lanes: shfl_down(v, 16) reads a lane that does
        # not exist (undefined in CUDA); the emulator says so.
        path = tmp_path / "block_sum.cu"
        path.write_text(BLOCK_SUM)
        with pytest.raises(Exception, match="beyond blockDim"):
            run_emulated(polypy.load(str(path)).kernel("block_sum"), grid, block, args)
        return
    for name, got in _backends(tmp_path, BLOCK_SUM, "block_sum", grid, block, args):
        np.testing.assert_allclose(got["out"], want, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("N, block", [(32, 32), (32, 64), (16, 256), (8, 64), (4, 32), (16, 48), (2, 48)])
def test_reduce_plus_less_greater_gives_every_thread_its_tiles_result(tmp_path, N, block) -> None:
    rng = np.random.default_rng(N * block)
    grid = 2
    total = grid * block
    x = rng.uniform(-4, 4, total).astype(np.float32)
    args = {"x": x, "sums": np.zeros(total, np.float32), "mins": np.zeros(total, np.float32),
            "maxs": np.zeros(total, np.float32), "isums": np.zeros(total, np.int32)}
    tiles = x.reshape(-1, N)
    want_sum = np.repeat(tiles.astype(np.float64).sum(axis=1), N)
    want_min = np.repeat(tiles.min(axis=1), N)
    want_max = np.repeat(tiles.max(axis=1), N)
    want_isum = np.repeat((tiles * np.float32(100.0)).astype(np.int32).sum(axis=1), N)
    for name, got in _backends(tmp_path, REDUCE % {"N": N}, "tile_reduce", grid, block, args):
        np.testing.assert_allclose(got["sums"], want_sum, rtol=1e-5, atol=1e-4, err_msg=name)
        np.testing.assert_array_equal(got["mins"], want_min, err_msg=name)
        np.testing.assert_array_equal(got["maxs"], want_max, err_msg=name)
        np.testing.assert_array_equal(got["isums"], want_isum, err_msg=name)
        # Every thread of a tile holds the same sum, bit for bit.
        sums = got["sums"].reshape(-1, N)
        assert (sums == sums[:, :1]).all(), name


def _tile_ops_reference(x: np.ndarray, N: int, block: int) -> dict[str, np.ndarray]:
    total = x.size
    i = np.arange(total)
    t = i % block  # linear thread index in the block
    rank = t % N
    start = i - rank  # first thread of the tile
    tiles = x.reshape(-1, N)
    meta_size = -(-block // N)
    any_ = np.repeat((tiles > 5).any(axis=1), N)
    all_ = np.repeat((tiles > 0).all(axis=1), N)
    bits = np.repeat(((np.fmod(tiles, 2) == 1) * (1 << np.arange(N))).sum(axis=1), N).astype(np.uint32)
    shf = np.zeros((total, 4), np.int32)
    shf[:, 0] = x[start + 1 % N]
    shf[:, 1] = np.where(rank >= 1, x[i - 1], x)
    shf[:, 2] = np.where(rank + 2 < N, x[np.minimum(i + 2, total - 1)], x)
    shf[:, 3] = x[start + (rank ^ 1)] if N > 1 else x
    return {"rank": rank + 100 * N, "meta": t // N + 1000 * meta_size, "votes": any_ + 2 * all_,
            "ballots": bits, "shf": shf.reshape(-1)}


@pytest.mark.parametrize("N, block", [(32, 32), (32, 64), (8, 64), (16, 256), (4, 48), (16, 48)])
def test_tile_ranks_votes_and_shuffles(tmp_path, N, block) -> None:
    rng = np.random.default_rng(7 * N + block)
    grid = 2
    total = grid * block
    x = rng.integers(-3, 10, total).astype(np.int32)
    args = {"x": x, "rank": np.zeros(total, np.int32), "meta": np.zeros(total, np.int32),
            "votes": np.zeros(total, np.int32), "ballots": np.zeros(total, np.uint32),
            "shf": np.zeros(4 * total, np.int32)}
    want = _tile_ops_reference(x, N, block)
    for name, got in _backends(tmp_path, TILE_OPS % {"N": N}, "tile_ops", grid, block, args):
        for key, value in want.items():
            np.testing.assert_array_equal(got[key], value, err_msg=f"{name}: {key}")


@pytest.mark.parametrize("block", [32, 64, 96])
def test_tiles_of_tiles_and_a_dynamic_partition(tmp_path, block) -> None:
    grid = 2
    total = grid * block
    args = {"out": np.zeros(4 * total, np.int32)}
    i = np.arange(total)
    t = i % block
    want = np.zeros((total, 4), np.int64)
    want[:, 0] = t % 4 + 10 * ((t % 32) // 4) + 1000 * 8
    want[:, 1] = t % 8 + 100 * 8
    want[:, 2] = block
    want[:, 3] = t - t % 4 + 3
    for name, got in _backends(tmp_path, NESTED, "nested", grid, block, args):
        np.testing.assert_array_equal(got["out"], want.reshape(-1), err_msg=name)


# ---------------------------------------------------------------------------- refusals

REFUSED = [
    ("cg::grid_group g = cg::this_grid();\n  if (threadIdx.x) g.sync();", "grid.sync() under control that depends"),
    ("cg::grid_group g = cg::this_grid();\n  if (blockIdx.x) cg::sync(g);", "grid.sync() under control that depends"),
    ("x[0] = cg::this_grid().is_valid();", "cooperative_groups::grid_group::is_valid is not supported"),
    ("cg::thread_block_tile<64> t = cg::tiled_partition<64>(cg::this_thread_block());\n  x[0] = t.shfl_down(x[0], 1);",
     "thread_block_tile<64>::shfl_down: shfl_up, shfl_down, shfl_xor and ballot of a tile of more than 32"),
    ("int k = x[1];\n  cg::thread_group g = cg::tiled_partition(cg::this_thread_block(), k);\n  x[0] = g.size();",
     "n must be a constant power of two"),
    ("cg::thread_block_tile<32> t = cg::tiled_partition<32>(cg::this_thread_block());\n"
     "  x[0] = cg::reduce(t, x[0], Mine());", "only the operators cg::plus"),
    ("cg::thread_block_tile<32> t = cg::tiled_partition<32>(cg::this_thread_block());\n"
     "  x[0] = cg::reduce(t, x[0], cg::plus<float>());", "an operator of another type than the value"),
    ("auto g = cg::labeled_partition(cg::tiled_partition<32>(cg::this_thread_block()), (float)x[threadIdx.x]);\n"
     "  x[0] = g.size();", "labeled_partition with a label of type 'float': the label must be an integer"),
    ("auto g = cg::binary_partition(cg::this_thread_block(), x[threadIdx.x] > 0);\n"
     "  x[0] = g.size();", "binary_partition of a thread_block: CUDA partitions a thread_block_tile of at most 32"),
    ("auto g = cg::binary_partition(cg::tiled_partition<64>(cg::this_thread_block()), x[threadIdx.x] > 0);\n"
     "  x[0] = g.size();", "binary_partition of a thread_block_tile<64>"),
]


@pytest.mark.parametrize("body, message", REFUSED)
def test_unsupported_cooperative_groups_are_located_errors_naming_the_feature(tmp_path, body, message) -> None:
    src = tmp_path / "refused.cu"
    src.write_text(PRELUDE + "struct Mine { __device__ int operator()(int a, int b) const { return a + b; } };\n"
                   "__global__ void k(int* x) {\n  " + body + "\n}\n")
    result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o",
                             str(tmp_path / "out.cpp")], capture_output=True, text=True, timeout=600)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"{src}:" in result.stderr and ": error: " in result.stderr and message in result.stderr, result.stderr
    assert "^" in result.stderr and not (tmp_path / "out.cpp").exists()


def test_a_refusal_points_at_the_call(tmp_path) -> None:
    src = tmp_path / "grid.cu"
    src.write_text(PRELUDE + "__global__ void k(int* x) {\n  x[0] = 1;\n  x[1] = cg::this_grid().is_valid();\n}\n")
    with pytest.raises(UserError) as info:
        polypy.load(str(src))
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (5, 10)


# A group passed by value to a device function as a thread_group, and the block by reference:
# the tree reduction through shared memory of the CUDA Programming Guide's pattern (own code).
GROUP_ARGUMENT = PRELUDE + r"""
__device__ int tree_sum(cg::thread_group g, int* scratch, int value) {
  int lane = g.thread_rank();
  for (int half = g.size() / 2; half > 0; half /= 2) {
    scratch[lane] = value;
    g.sync();
    if (lane < half) value += scratch[lane + half];
    g.sync();
  }
  return value;
}
__device__ void scale(const cg::thread_block& block, int* data) {
  data[block.thread_rank()] *= 3;
  block.sync();
}
__global__ void group_argument(int* data, int* out) {
  extern __shared__ int scratch[];
  cg::thread_block block = cg::this_thread_block();
  int* mine = data + blockIdx.x * blockDim.x;
  scale(block, mine);
  int s = tree_sum(block, scratch, mine[block.size() - 1 - block.thread_rank()]);
  if (block.thread_rank() == 0) out[blockIdx.x] = s;
}
"""


@pytest.mark.parametrize("block", [32, 64, 256])
def test_groups_passed_to_device_functions(tmp_path, block) -> None:
    grid = 3
    data = np.arange(grid * block, dtype=np.int32) % 17
    args = {"data": data, "out": np.zeros(grid, np.int32)}
    path = tmp_path / "group_argument.cu"
    path.write_text(GROUP_ARGUMENT)
    gpu = polypy.load(str(path)).kernel("group_argument")
    want_out = (3 * data.reshape(grid, block)).sum(axis=1)
    shmem = 4 * block
    emulated = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    from polypy.emulator import emulate
    emulate(gpu, grid, block, emulated, shmem=shmem)
    c = run_c(gpu, grid, block, args, shmem=shmem)
    mod = polypy.compile(str(path))
    llvm = {k: v.copy() for k, v in args.items()}
    mod.group_argument[grid, block, shmem](llvm["data"], llvm["out"])
    for name, got in (("emulator", emulated), ("c", c), ("llvm", llvm)):
        np.testing.assert_array_equal(got["out"], want_out, err_msg=name)
        np.testing.assert_array_equal(got["data"], 3 * data, err_msg=name)


# The result types of CUDA's declarations: a thread_group's rank and cg::thread_rank(g) are
# unsigned long long (so rank - 40 wraps in 64 bits), a block's and a tile's are unsigned int;
# the block is passed by value (its copy constructor) to a device function; the operators of
# cg::reduce called directly.
RESULT_TYPES = PRELUDE + r"""
__device__ void wide(cg::thread_block b, long long* o) { o[b.thread_rank()] = (long long)(cg::thread_rank(b) - 40); }
__global__ void result_types(long long* o, long long* p, long long* q, int* r) {
  cg::thread_block cta = cg::this_thread_block();
  cg::thread_group g = cg::tiled_partition(cta, 16);
  cg::thread_block_tile<8> t = cg::tiled_partition<8>(cta);
  wide(cta, o);
  p[cta.thread_rank()] = g.thread_rank() - 40;
  q[cta.thread_rank()] = t.thread_rank() - 40;
  r[cta.thread_rank()] = cg::plus<int>()(3, (int)t.thread_rank()) + 10 * cg::less<int>()(5, 2) +
                         100 * cg::greater<int>()(5, 2);
}
"""


def test_ranks_have_cudas_result_types(tmp_path) -> None:
    grid, block = 1, 64
    args = {k: np.zeros(block, np.int64) for k in ("o", "p", "q")}
    args["r"] = np.zeros(block, np.int32)
    t = np.arange(block, dtype=np.int64)
    for name, got in _backends(tmp_path, RESULT_TYPES, "result_types", grid, block, args):
        np.testing.assert_array_equal(got["o"], t - 40, err_msg=name)
        np.testing.assert_array_equal(got["p"], t % 16 - 40, err_msg=name)
        np.testing.assert_array_equal(got["q"], (t % 8 - 40) % (1 << 32), err_msg=name)
        np.testing.assert_array_equal(got["r"], 3 + t % 8 + 20 + 500, err_msg=name)


# A whole program: host code, a launch, per-block sums of integers by tiles and cg::reduce.
PROGRAM = r"""#include <cstdio>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

__global__ void sums(const int* x, int* out, int n) {
  __shared__ int per_tile[8];
  cg::thread_block cta = cg::this_thread_block();
  cg::thread_block_tile<16> tile = cg::tiled_partition<16>(cta);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int s = cg::reduce(tile, i < n ? x[i] : 0, cg::plus<int>());
  if (tile.thread_rank() == 0) per_tile[tile.meta_group_rank()] = s;
  cta.sync();
  if (cta.thread_rank() == 0) {
    int total = 0;
    for (unsigned int k = 0; k < tile.meta_group_size(); ++k) total += per_tile[k];
    out[blockIdx.x] = total;
  }
}

int main() {
  const int n = 1000, threads = 128, blocks = (n + threads - 1) / threads;
  int h[n], r[blocks];
  for (int i = 0; i < n; ++i) h[i] = (i * 7) % 23 - 11;
  int *x, *out;
  cudaMalloc(&x, n * sizeof(int));
  cudaMalloc(&out, blocks * sizeof(int));
  cudaMemcpy(x, h, n * sizeof(int), cudaMemcpyHostToDevice);
  sums<<<blocks, threads>>>(x, out, n);
  cudaMemcpy(r, out, blocks * sizeof(int), cudaMemcpyDeviceToHost);
  for (int b = 0; b < blocks; ++b) printf("block %d: %d\n", b, r[b]);
  cudaFree(x);
  cudaFree(out);
  return 0;
}
"""


def test_a_whole_program_prints_what_cuda_prints(tmp_path) -> None:
    src = tmp_path / "cg_program.cu"
    src.write_text(PROGRAM)
    h = (np.arange(1000) * 7) % 23 - 11
    want = "".join(f"block {b}: {h[b * 128:(b + 1) * 128].sum()}\n" for b in range(8))
    for extra in ((), ("--emulate",)):
        result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(src), *extra],
                                capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout == want, extra
