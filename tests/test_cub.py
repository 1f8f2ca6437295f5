"""CUB's block and warp primitives (polypy's own <cub/...>, docs/cub.md) in our own kernels, run
through the emulator, the LLVM JIT and the C backend, each result against NumPy: reductions in
rank order (bit for bit against a sequential float32 sum), scans with and without an initial
value and aggregates, logical warps with fewer valid lanes, and stable radix sorts of keys and
pairs (negative numbers, -0.0 and +0.0 as one key, bit ranges, descending, striped output), block exchanges
between arrangements and by rank, block histograms, discontinuity flags, block shuffles, and CUB's thread ranks (RowMajorTid, LaneId)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from c_support import WAYS, need_compiler, run_way

SOURCE = r"""
#include <cub/cub.cuh>

__global__ void block_sums(const float* x, float* out, int n) {
  typedef cub::BlockReduce<float, 128> BlockReduceT;
  __shared__ typename BlockReduceT::TempStorage temp;
  int i = blockIdx.x * 128 + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  float s = BlockReduceT(temp).Sum(v);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

__global__ void block_max_of_valid(const int* x, int* out, int n) {
  typedef cub::BlockReduce<int, 32, cub::BLOCK_REDUCE_WARP_REDUCTIONS, 2> BlockReduceT;
  __shared__ typename BlockReduceT::TempStorage temp;
  int rank = threadIdx.y * 32 + threadIdx.x;
  int valid = n - (int)blockIdx.x * 64;
  int i = blockIdx.x * 64 + rank;
  int m = BlockReduceT(temp).Reduce(i < n ? x[i] : 0, cub::Max(), valid < 64 ? valid : 64);
  if (rank == 0) out[blockIdx.x] = m;
}

__global__ void block_item_sums(const double* x, double* out) {
  typedef cub::BlockReduce<double, 64> BlockReduceT;
  __shared__ typename BlockReduceT::TempStorage temp;
  double items[4];
  for (int k = 0; k < 4; ++k) items[k] = x[(blockIdx.x * 64 + threadIdx.x) * 4 + k];
  double s = BlockReduceT(temp).Sum(items);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

__global__ void block_scans(const int* x, int* ex, int* inc, int* mx, int* agg) {
  typedef cub::BlockScan<int, 32, cub::BLOCK_SCAN_RAKING, 4> BlockScanT;
  __shared__ typename BlockScanT::TempStorage temp;
  int rank = threadIdx.y * 32 + threadIdx.x;
  int base = (blockIdx.x * 128 + rank) * 3;
  int items[3], outs[3], total;
  for (int k = 0; k < 3; ++k) items[k] = x[base + k];
  BlockScanT(temp).ExclusiveSum(items, outs, total);
  for (int k = 0; k < 3; ++k) ex[base + k] = outs[k];
  __syncthreads();
  int running_max;
  BlockScanT(temp).ExclusiveScan(items[0], running_max, -1000000, cub::Max());
  mx[blockIdx.x * 128 + rank] = running_max;
  __syncthreads();
  BlockScanT(temp).InclusiveSum(items, items);
  for (int k = 0; k < 3; ++k) inc[base + k] = items[k];
  if (rank == 0) agg[blockIdx.x] = total;
}

__global__ void block_min_scan(const float* x, float* out) {
  typedef cub::BlockScan<float, 64> BlockScanT;
  __shared__ typename BlockScanT::TempStorage temp;
  int i = blockIdx.x * 64 + threadIdx.x;
  float m;
  BlockScanT(temp).InclusiveScan(x[i], m, cub::Min());
  out[i] = m;
}

template <int LANES>
__global__ void warp_sums(const double* x, double* out, int valid) {
  typedef cub::WarpReduce<double, LANES> WarpReduceT;
  __shared__ typename WarpReduceT::TempStorage temp[128 / LANES];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double s = WarpReduceT(temp[threadIdx.x / LANES]).Sum(x[i], valid);
  if (threadIdx.x % LANES == 0) out[i / LANES] = s;
}
template __global__ void warp_sums<16>(const double*, double*, int);
template __global__ void warp_sums<32>(const double*, double*, int);

__global__ void sort_pairs(float* keys, int* values) {
  typedef cub::BlockRadixSort<float, 64, 4, int> BlockRadixSortT;
  __shared__ typename BlockRadixSortT::TempStorage temp;
  float k[4];
  int v[4];
  int base = (blockIdx.x * 64 + threadIdx.x) * 4;
  for (int j = 0; j < 4; ++j) { k[j] = keys[base + j]; v[j] = values[base + j]; }
  BlockRadixSortT(temp).Sort(k, v);
  for (int j = 0; j < 4; ++j) { keys[base + j] = k[j]; values[base + j] = v[j]; }
}

__global__ void sort_ints_descending_striped(int* keys) {
  typedef cub::BlockRadixSort<int, 32, 2> BlockRadixSortT;
  __shared__ typename BlockRadixSortT::TempStorage temp;
  int k[2];
  int base = blockIdx.x * 64;
  for (int j = 0; j < 2; ++j) k[j] = keys[base + threadIdx.x * 2 + j];
  BlockRadixSortT(temp).SortDescendingBlockedToStriped(k);
  for (int j = 0; j < 2; ++j) keys[base + j * 32 + threadIdx.x] = k[j];
}

__global__ void sort_bits(unsigned int* keys) {
  typedef cub::BlockRadixSort<unsigned int, 32, 2> BlockRadixSortT;
  __shared__ typename BlockRadixSortT::TempStorage temp;
  unsigned int k[2];
  int base = blockIdx.x * 64 + threadIdx.x * 2;
  for (int j = 0; j < 2; ++j) k[j] = keys[base + j];
  BlockRadixSortT(temp).Sort(k, 4, 20);
  for (int j = 0; j < 2; ++j) keys[base + j] = k[j];
}
__global__ void load_sort_store(const int* in, int* out, int n) {
  typedef cub::BlockLoad<int, 32, 4, cub::BLOCK_LOAD_WARP_TRANSPOSE> BlockLoadT;
  typedef cub::BlockRadixSort<int, 32, 4> BlockRadixSortT;
  typedef cub::BlockStore<int, 32, 4, cub::BLOCK_STORE_STRIPED> BlockStoreT;
  __shared__ typename BlockLoadT::TempStorage load_temp;  // (one each; a union of them: test_a_union_of_temp_storages)
  __shared__ typename BlockRadixSortT::TempStorage sort_temp;
  __shared__ typename BlockStoreT::TempStorage store_temp;
  int offset = blockIdx.x * 128;
  int valid = n - offset < 128 ? n - offset : 128;
  int items[4];
  BlockLoadT(load_temp).Load(in + offset, items, valid, 2147483647);
  __syncthreads();
  BlockRadixSortT(sort_temp).SortBlockedToStriped(items);
  __syncthreads();
  BlockStoreT(store_temp).Store(out + offset, items, valid);
}

__global__ void striped_scan(const float* in, float* out) {
  typedef cub::BlockLoad<float, 64, 2, cub::BLOCK_LOAD_STRIPED> BlockLoadT;
  typedef cub::BlockScan<float, 64> BlockScanT;
  __shared__ typename BlockScanT::TempStorage temp;
  float items[2];
  BlockLoadT().Load(in + blockIdx.x * 128, items);
  float sums[2];
  BlockScanT(temp).InclusiveSum(items, sums);  // over the items in blocked order of the striped values
  cub::StoreDirectBlocked(threadIdx.x, out + blockIdx.x * 128, sums);
}

__global__ void thread_ids(int* rank3, int* lane, int* rank_x_only) {
  int t = ((blockIdx.x * blockDim.z + threadIdx.z) * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  rank3[t] = cub::RowMajorTid(blockDim.x, blockDim.y, blockDim.z);
  lane[t] = (int)cub::LaneId();
  rank_x_only[t] = cub::RowMajorTid(blockDim.x, 1, 1);  // CUB: a dimension of 1 ignores that index
}

__global__ void warp_scans(const int* x, int* inc, int* ex, int* agg) {
  typedef cub::WarpScan<int, 8> WarpScanT;
  __shared__ typename WarpScanT::TempStorage temp[8];
  int i = blockIdx.x * 64 + threadIdx.x;
  int a, b, total;
  WarpScanT(temp[threadIdx.x / 8]).InclusiveSum(x[i], a, total);
  WarpScanT(temp[threadIdx.x / 8]).ExclusiveScan(x[i], b, -100, cub::Max());
  inc[i] = a;
  ex[i] = b;
  if (threadIdx.x % 8 == 7) agg[i / 8] = total;
}
"""

RNG = np.random.default_rng(20261129)


def _run(kernel, grid, block, args, way):
    return run_way(SOURCE, kernel, grid, block, args, way, name="cub_kernels.cu")


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("n", [128, 1000])
def test_block_sum_in_rank_order_bit_for_bit(way, n) -> None:
    need_compiler()
    blocks = (n + 127) // 128
    x = RNG.standard_normal(n).astype(np.float32)
    got = _run("block_sums", blocks, 128, {"x": x, "out": np.zeros(blocks, np.float32), "n": n}, way)
    padded = np.zeros(blocks * 128, np.float32)
    padded[:n] = x
    want = np.cumsum(padded.reshape(blocks, 128), axis=1, dtype=np.float32)[:, -1]  # sequential, in float32
    np.testing.assert_array_equal(got["out"], want)


@pytest.mark.parametrize("way", WAYS)
def test_block_reduce_with_an_operator_and_fewer_valid_threads_in_a_2d_block(way) -> None:
    need_compiler()
    n = 300  # the last block has 44 valid threads
    x = RNG.integers(-10_000, 10_000, n).astype(np.int32)
    got = _run("block_max_of_valid", 5, (32, 2), {"x": x, "out": np.zeros(5, np.int32), "n": n}, way)
    np.testing.assert_array_equal(got["out"], [x[b * 64:(b + 1) * 64].max() for b in range(5)])


@pytest.mark.parametrize("way", WAYS)
def test_block_sum_of_items_per_thread(way) -> None:
    need_compiler()
    x = RNG.standard_normal(3 * 64 * 4)
    got = _run("block_item_sums", 3, 64, {"x": x, "out": np.zeros(3)}, way)
    per_thread = x.reshape(3, 64, 4)
    partial = per_thread[:, :, 0] + per_thread[:, :, 1] + per_thread[:, :, 2] + per_thread[:, :, 3]
    np.testing.assert_array_equal(got["out"], np.cumsum(partial, axis=1)[:, -1])


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("blocks", [1, 3])
def test_block_scans_blocked_items_aggregate_and_initial_value(way, blocks) -> None:
    need_compiler()
    x = RNG.integers(-50, 50, blocks * 128 * 3).astype(np.int32)
    zeros = np.zeros_like(x)
    got = _run("block_scans", blocks, (32, 4),
               {"x": x, "ex": zeros, "inc": zeros, "mx": np.zeros(blocks * 128, np.int32),
                "agg": np.zeros(blocks, np.int32)}, way)
    rows = x.reshape(blocks, -1)
    inclusive = np.cumsum(rows, axis=1)
    np.testing.assert_array_equal(got["inc"].reshape(blocks, -1), inclusive)
    np.testing.assert_array_equal(got["ex"].reshape(blocks, -1), inclusive - rows)
    np.testing.assert_array_equal(got["agg"], rows.sum(axis=1))
    firsts = x.reshape(blocks, 128, 3)[:, :, 0]
    running = np.maximum.accumulate(firsts, axis=1)
    want = np.concatenate([np.full((blocks, 1), -1_000_000), np.maximum(running[:, :-1], -1_000_000)], axis=1)
    np.testing.assert_array_equal(got["mx"].reshape(blocks, 128), want)


@pytest.mark.parametrize("way", WAYS)
def test_inclusive_min_scan(way) -> None:
    need_compiler()
    x = RNG.standard_normal(128).astype(np.float32)
    got = _run("block_min_scan", 2, 64, {"x": x, "out": np.zeros(128, np.float32)}, way)
    np.testing.assert_array_equal(got["out"], np.minimum.accumulate(x.reshape(2, 64), axis=1).ravel())


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("lanes, valid", [(16, 11), (32, 32), (32, 5)])
def test_warp_reduce_of_logical_warps_with_valid_lanes(way, lanes, valid) -> None:
    need_compiler()
    x = RNG.standard_normal(256)
    got = _run(f"warp_sums_{lanes}", 2, 128, {"x": x, "out": np.zeros(256 // lanes), "valid": valid}, way)
    np.testing.assert_allclose(got["out"], x.reshape(-1, lanes)[:, :valid].sum(axis=1), rtol=1e-13)


def _keys_with_ties(count: int) -> np.ndarray:
    keys = RNG.standard_normal(count).astype(np.float32)
    keys[3], keys[9], keys[17] = -0.0, 0.0, -0.0  # one key: their order is kept, and their bits
    keys[40:48] = keys[30]  # equal keys keep their order
    keys[50], keys[51] = np.inf, -np.inf
    return keys


@pytest.mark.parametrize("way", WAYS)
def test_radix_sort_of_pairs_is_stable_and_keeps_negative_zero(way) -> None:
    need_compiler()
    keys = _keys_with_ties(2 * 256)
    values = np.arange(keys.size, dtype=np.int32)
    got = _run("sort_pairs", 2, 64, {"keys": keys, "values": values}, way)
    for b in range(2):
        tile = slice(b * 256, (b + 1) * 256)
        order = np.argsort(np.where(keys[tile] == 0, np.float32(0), keys[tile]), kind="stable")
        np.testing.assert_array_equal(got["keys"][tile].view(np.uint32), keys[tile][order].view(np.uint32))
        np.testing.assert_array_equal(got["values"][tile], values[tile][order])


@pytest.mark.parametrize("way", WAYS)
def test_radix_sort_descending_into_a_striped_arrangement(way) -> None:
    need_compiler()
    keys = RNG.integers(-2**31, 2**31 - 1, 3 * 64).astype(np.int32)
    got = _run("sort_ints_descending_striped", 3, 32, {"keys": keys}, way)
    for b in range(3):
        tile = keys[b * 64:(b + 1) * 64]
        # item j of thread t is the tile's element j * 32 + t: the striped output is the sorted tile itself
        np.testing.assert_array_equal(got["keys"][b * 64:(b + 1) * 64], np.sort(tile)[::-1])


@pytest.mark.parametrize("way", WAYS)
def test_radix_sort_on_a_range_of_bits(way) -> None:
    need_compiler()
    keys = RNG.integers(0, 2**32, 2 * 64, dtype=np.uint64).astype(np.uint32)
    got = _run("sort_bits", 2, 32, {"keys": keys}, way)
    for b in range(2):
        tile = keys[b * 64:(b + 1) * 64]
        order = np.argsort((tile >> 4) & 0xFFFF, kind="stable")  # bits [4, 20) only; ties keep their order
        np.testing.assert_array_equal(got["keys"][b * 64:(b + 1) * 64], tile[order])


PROGRAM = r"""
#include <cstdio>
#include <cub/cub.cuh>

__global__ void partial_sums(const float* x, float* sums, int n) {
  typedef cub::BlockReduce<float, 256> BlockReduceT;
  __shared__ typename BlockReduceT::TempStorage temp;
  int i = blockIdx.x * 256 + threadIdx.x;
  float s = BlockReduceT(temp).Sum(i < n ? x[i] : 0.0f);
  if (threadIdx.x == 0) sums[blockIdx.x] = s;
}

int main() {
  const int n = 5000, blocks = (n + 255) / 256;
  float *h = new float[n], *hs = new float[blocks];
  for (int i = 0; i < n; ++i) h[i] = (float)(i % 7);
  float *dx, *ds;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&ds, blocks * sizeof(float));
  cudaMemcpy(dx, h, n * sizeof(float), cudaMemcpyHostToDevice);
  partial_sums<<<blocks, 256>>>(dx, ds, n);
  cudaMemcpy(hs, ds, blocks * sizeof(float), cudaMemcpyDeviceToHost);
  double total = 0;
  for (int b = 0; b < blocks; ++b) total += hs[b];
  printf("%.1f %.1f\n", total, hs[blocks - 1]);
  return 0;
}
"""


@pytest.mark.parametrize("mode", [(), ("--emulate",)])
def test_a_whole_program_including_cub_runs(tmp_path, mode) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "cub_program.cu"
    src.write_text(PROGRAM)
    result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", *mode, str(src)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    h = np.arange(5000) % 7
    assert result.stdout == f"{h.sum():.1f} {h[19 * 256:].sum():.1f}\n"


GRAD = r"""
#include <cub/cub.cuh>
__global__ void squares(const double* x, double* out, int n) {
  typedef cub::BlockReduce<double, 64> BlockReduceT;
  __shared__ typename BlockReduceT::TempStorage temp;
  int i = blockIdx.x * 64 + threadIdx.x;
  double s = BlockReduceT(temp).Sum(i < n ? x[i] * x[i] : 0.0);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
"""


def test_the_gradient_through_a_block_reduction(tmp_path) -> None:
    """d out[b] / d x[i] = 2 x[i] for the elements of block b (reverse mode, float64)."""
    import polypy

    need_compiler()
    src = tmp_path / "squares.cu"
    src.write_text(GRAD)
    g = polypy.grad(polypy.compile(str(src)).squares, wrt=["x"])
    n, blocks = 150, 3
    x = RNG.standard_normal(n)
    seeds = RNG.standard_normal(blocks)
    dx = np.zeros(n)
    out = np.zeros(blocks)
    g[blocks, 64](x, dx, out, seeds.copy(), np.int32(n))
    np.testing.assert_allclose(dx, 2 * x * seeds[np.arange(n) // 64], rtol=1e-12)
    padded = np.zeros(blocks * 64)
    padded[:n] = x * x
    np.testing.assert_allclose(out, padded.reshape(blocks, 64).sum(axis=1), rtol=1e-12)



@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("n", [256, 300])
def test_load_sort_store_of_tiles_with_a_partial_last_tile(way, n) -> None:
    """CUB's canonical pattern: BlockLoad (blocked, out-of-range items the default), a sort to a
    striped arrangement, BlockStore of a striped arrangement (only the valid elements)."""
    need_compiler()
    blocks = (n + 127) // 128
    x = RNG.integers(-1000, 1000, n).astype(np.int32)
    out = np.full(blocks * 128, -7, np.int32)
    got = _run("load_sort_store", blocks, 32, {"in": x, "out": out, "n": n}, way)
    want = out.copy()
    for b in range(blocks):
        tile = x[b * 128:(b + 1) * 128]
        want[b * 128:b * 128 + tile.size] = np.sort(tile)  # the defaults (INT_MAX) sort last, past the valid ones
    np.testing.assert_array_equal(got["out"], want)


@pytest.mark.parametrize("way", WAYS)
def test_striped_load_then_scan_then_direct_store(way) -> None:
    need_compiler()
    x = RNG.integers(-8, 8, 256).astype(np.float32)
    got = _run("striped_scan", 2, 64, {"in": x, "out": np.zeros(256, np.float32)}, way)
    for b in range(2):
        tile = x[b * 128:(b + 1) * 128]
        blocked = tile.reshape(2, 64).T.ravel()  # thread t holds elements t and 64 + t
        np.testing.assert_array_equal(got["out"][b * 128:(b + 1) * 128], np.cumsum(blocked))


@pytest.mark.parametrize("way", WAYS)
def test_warp_scans_of_logical_warps(way) -> None:
    need_compiler()
    x = RNG.integers(-50, 50, 128).astype(np.int32)
    got = _run("warp_scans", 2, 64, {"x": x, "inc": np.zeros(128, np.int32), "ex": np.zeros(128, np.int32),
                                      "agg": np.zeros(16, np.int32)}, way)
    warps = x.reshape(16, 8)
    np.testing.assert_array_equal(got["inc"].reshape(16, 8), np.cumsum(warps, axis=1))
    np.testing.assert_array_equal(got["agg"], warps.sum(axis=1))
    running = np.maximum(np.maximum.accumulate(warps, axis=1), -100)
    np.testing.assert_array_equal(got["ex"].reshape(16, 8)[:, 1:], running[:, :-1])
    np.testing.assert_array_equal(got["ex"].reshape(16, 8)[:, 0], -100)


@pytest.mark.parametrize("way", WAYS)
def test_row_major_tid_and_lane_id(way) -> None:
    need_compiler()
    n = 2 * 64
    got = _run("thread_ids", 2, (8, 4, 2), {"rank3": np.zeros(n, np.int32), "lane": np.zeros(n, np.int32),
                                            "rank_x_only": np.zeros(n, np.int32)}, way)
    rank = np.tile(np.arange(64, dtype=np.int32), 2)
    np.testing.assert_array_equal(got["rank3"], rank)
    np.testing.assert_array_equal(got["lane"], rank % 32)
    np.testing.assert_array_equal(got["rank_x_only"], rank % 8)


EXCHANGE_SOURCE = r"""
#include <cub/cub.cuh>

__global__ void exchanges(const int* in, int* blocked, int* striped, int* warp_striped, int* back,
                          int* scattered, int* to_striped) {
  typedef cub::BlockExchange<int, 32, 3, false, 2> BlockExchangeT;  // 32 x 2 threads, 3 items each
  __shared__ typename BlockExchangeT::TempStorage temp;
  int rank = threadIdx.y * 32 + threadIdx.x;
  int base = blockIdx.x * 192;
  int items[3], out[3], ws[3], ranks[3];
  for (int k = 0; k < 3; ++k) items[k] = in[base + k * 64 + rank];  // striped
  BlockExchangeT(temp).StripedToBlocked(items, out);
  for (int k = 0; k < 3; ++k) blocked[base + rank * 3 + k] = out[k];
  BlockExchangeT(temp).BlockedToStriped(out);
  for (int k = 0; k < 3; ++k) striped[base + k * 64 + rank] = out[k];
  for (int k = 0; k < 3; ++k) items[k] = in[base + rank * 3 + k];  // blocked
  BlockExchangeT(temp).BlockedToWarpStriped(items, ws);
  for (int k = 0; k < 3; ++k) warp_striped[base + (rank / 32) * 96 + k * 32 + rank % 32] = ws[k];
  BlockExchangeT(temp).WarpStripedToBlocked(ws);
  for (int k = 0; k < 3; ++k) back[base + rank * 3 + k] = ws[k];
  for (int k = 0; k < 3; ++k) ranks[k] = 191 - (rank * 3 + k);
  BlockExchangeT(temp).ScatterToBlocked(items, out, ranks);
  for (int k = 0; k < 3; ++k) scattered[base + rank * 3 + k] = out[k];
  BlockExchangeT(temp).ScatterToStriped(items, ranks);
  for (int k = 0; k < 3; ++k) to_striped[base + k * 64 + rank] = items[k];
}

__global__ void histograms(const unsigned char* in, unsigned int* once, unsigned int* twice) {
  typedef cub::BlockHistogram<unsigned char, 16, 4, 100, cub::BLOCK_HISTO_ATOMIC, 4> BlockHistogramT;
  __shared__ typename BlockHistogramT::TempStorage temp;
  __shared__ unsigned int hist[100];  // 100 bins for 64 threads: InitHistogram's last round is partial
  int rank = threadIdx.y * 16 + threadIdx.x;
  unsigned char items[4];
  for (int k = 0; k < 4; ++k) items[k] = in[blockIdx.x * 256 + rank * 4 + k];
  BlockHistogramT(temp).Histogram(items, hist);
  __syncthreads();
  for (int b = rank; b < 100; b += 64) once[blockIdx.x * 100 + b] = hist[b];
  __syncthreads();
  BlockHistogramT(temp).Composite(items, hist);
  __syncthreads();
  for (int b = rank; b < 100; b += 64) twice[blockIdx.x * 100 + b] = hist[b];
}
__global__ void runs(const int* in, int* heads, int* tails, int* heads_pred, int* both_h, int* both_t) {
  typedef cub::BlockDiscontinuity<int, 16, 2> BlockDiscontinuityT;  // 16 x 2 threads, 3 items each
  __shared__ typename BlockDiscontinuityT::TempStorage temp;
  int rank = threadIdx.y * 16 + threadIdx.x;
  int base = blockIdx.x * 96;
  int items[3], h[3], t[3];
  for (int k = 0; k < 3; ++k) items[k] = in[base + rank * 3 + k];
  BlockDiscontinuityT(temp).FlagHeads(h, items, cub::Inequality());
  for (int k = 0; k < 3; ++k) heads[base + rank * 3 + k] = h[k];
  BlockDiscontinuityT(temp).FlagTails(t, items, cub::Inequality());
  for (int k = 0; k < 3; ++k) tails[base + rank * 3 + k] = t[k];
  int pred = blockIdx.x > 0 ? in[base - 1] : -1;
  BlockDiscontinuityT(temp).FlagHeads(h, items, cub::Inequality(), pred);
  for (int k = 0; k < 3; ++k) heads_pred[base + rank * 3 + k] = h[k];
  BlockDiscontinuityT(temp).FlagHeadsAndTails(h, pred, t, in[base + 96], items, cub::Inequality());
  for (int k = 0; k < 3; ++k) both_h[base + rank * 3 + k] = h[k];
  for (int k = 0; k < 3; ++k) both_t[base + rank * 3 + k] = t[k];
}

__global__ void shuffles(const float* in, const float* in2, float* off, float* rot, float* up, float* down,
                         float* suffix) {
  typedef cub::BlockShuffle<float, 64> BlockShuffleT;
  __shared__ typename BlockShuffleT::TempStorage temp;
  int i = blockIdx.x * 64 + threadIdx.x;
  float y = -1.0f, z;
  BlockShuffleT(temp).Offset(in[i], y, -3);
  off[i] = y;
  BlockShuffleT(temp).Rotate(in[i], z, 5);
  rot[i] = z;
  float items[2], prev[2] = {-1.0f, -1.0f}, next[2] = {-1.0f, -1.0f}, s;
  for (int k = 0; k < 2; ++k) items[k] = in2[i * 2 + k];
  BlockShuffleT(temp).Up(items, prev, s);
  BlockShuffleT(temp).Down(items, next);
  for (int k = 0; k < 2; ++k) up[i * 2 + k] = prev[k];
  for (int k = 0; k < 2; ++k) down[i * 2 + k] = next[k];
  suffix[i] = s;
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_block_exchange_between_arrangements_and_by_rank(way) -> None:
    need_compiler()
    x = RNG.integers(-1000, 1000, 2 * 192).astype(np.int32)
    names = ("blocked", "striped", "warp_striped", "back", "scattered", "to_striped")
    got = run_way(EXCHANGE_SOURCE, "exchanges", 2, (32, 2), {"in": x, **{k: np.zeros_like(x) for k in names}}, way,
                  name="cub_exchange.cu")
    # Each output is stored in the arrangement it was read out in, so a right exchange gives the input back;
    # the scatters reverse each block's tile (rank 191 - j for tile element j).
    for k in ("blocked", "striped", "warp_striped", "back"):
        np.testing.assert_array_equal(got[k], x, err_msg=k)
    reversed_tiles = x.reshape(2, 192)[:, ::-1].ravel()
    np.testing.assert_array_equal(got["scattered"], reversed_tiles)
    np.testing.assert_array_equal(got["to_striped"], reversed_tiles)


@pytest.mark.parametrize("way", WAYS)
def test_block_histogram_init_and_composite(way) -> None:
    need_compiler()
    x = RNG.integers(0, 100, 3 * 256).astype(np.uint8)
    got = run_way(EXCHANGE_SOURCE, "histograms", 3, (16, 4), {"in": x, "once": np.zeros(300, np.uint32),
                                                             "twice": np.zeros(300, np.uint32)}, way,
                  name="cub_exchange.cu")
    want = np.concatenate([np.bincount(x[b * 256:(b + 1) * 256], minlength=100) for b in range(3)]).astype(np.uint32)
    np.testing.assert_array_equal(got["once"], want)
    np.testing.assert_array_equal(got["twice"], 2 * want)


@pytest.mark.parametrize("way", WAYS)
def test_block_discontinuity_flags_heads_and_tails_of_runs(way) -> None:
    need_compiler()
    x = np.repeat(RNG.integers(0, 5, 200), RNG.integers(1, 4, 200))[:193].astype(np.int32)
    assert x.size == 193
    names = ("heads", "tails", "heads_pred", "both_h", "both_t")
    got = run_way(EXCHANGE_SOURCE, "runs", 2, (16, 2), {"in": x, **{k: np.zeros(192, np.int32) for k in names}}, way,
                  name="cub_exchange.cu")
    for b in range(2):
        tile, base = x[b * 96:(b + 1) * 96], b * 96
        differs = (tile[1:] != tile[:-1]).astype(np.int32)
        pred = -1 if b == 0 else x[base - 1]
        heads = np.concatenate([[1], differs])
        tails = np.concatenate([differs, [1]])
        with_pred = np.concatenate([[int(pred != tile[0])], differs])
        with_succ = np.concatenate([differs, [int(tile[-1] != x[base + 96])]])
        for k, want in (("heads", heads), ("tails", tails), ("heads_pred", with_pred), ("both_h", with_pred),
                        ("both_t", with_succ)):
            np.testing.assert_array_equal(got[k][base:base + 96], want, err_msg=f"{k} of block {b}")


@pytest.mark.parametrize("way", WAYS)
def test_block_shuffle_offset_rotate_up_down(way) -> None:
    need_compiler()
    x = RNG.standard_normal(128).astype(np.float32)
    x2 = RNG.standard_normal(256).astype(np.float32)
    args = {"in": x, "in2": x2, "off": np.zeros(128, np.float32), "rot": np.zeros(128, np.float32),
            "up": np.zeros(256, np.float32), "down": np.zeros(256, np.float32), "suffix": np.zeros(128, np.float32)}
    got = run_way(EXCHANGE_SOURCE, "shuffles", 2, 64, args, way, name="cub_exchange.cu")
    for b in range(2):
        t, t2 = x[b * 64:(b + 1) * 64], x2[b * 128:(b + 1) * 128]
        np.testing.assert_array_equal(got["off"][b * 64:(b + 1) * 64], np.concatenate([[-1.0] * 3, t[:-3]]))
        np.testing.assert_array_equal(got["rot"][b * 64:(b + 1) * 64], np.roll(t, -5))
        np.testing.assert_array_equal(got["up"][b * 128:(b + 1) * 128], np.concatenate([[-1.0], t2[:-1]]))
        np.testing.assert_array_equal(got["down"][b * 128:(b + 1) * 128], np.concatenate([t2[1:], [-1.0]]))
        np.testing.assert_array_equal(got["suffix"][b * 64:(b + 1) * 64], np.full(64, t2[-1]))


def test_a_union_of_temp_storages(tmp_path) -> None:
    """CUB's examples share one storage between primitives: a ``__shared__`` union of their
    ``TempStorage``s (a byte pool, docs/typed_views.md); BlockReduce then BlockScan through one
    such union: tests/test_unions.py."""
    src = tmp_path / "union.cu"
    src.write_text("""#include <cub/cub.cuh>
__global__ void k(const int* in, int* out) {
  typedef cub::BlockLoad<int, 32, 2> BlockLoadT;
  typedef cub::BlockStore<int, 32, 2, cub::BLOCK_STORE_STRIPED> BlockStoreT;
  __shared__ union { typename BlockLoadT::TempStorage load; typename BlockStoreT::TempStorage store; } temp;
  int items[2];
  BlockLoadT(temp.load).Load(in + blockIdx.x * 64, items);
  __syncthreads();
  BlockStoreT(temp.store).Store(out + blockIdx.x * 64, items);
}
""")
    x = np.arange(128, dtype=np.int32) * 3 - 50
    got = run_way(src.read_text(), "k", 2, 32, {"in": x, "out": np.zeros(128, np.int32)}, "emulator",
                  name="union.cu")
    want = x.reshape(2, 32, 2).transpose(0, 2, 1).reshape(-1)  # blocked in, striped out
    np.testing.assert_array_equal(got["out"], want)
