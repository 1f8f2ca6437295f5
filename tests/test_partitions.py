"""Groups of dynamic membership (cg::binary_partition, cg::labeled_partition; frontend/lower/partitions.py)
and warp operations in loops whose trips differ between threads (gpu2cpu/uniform_warp_loops.py):
our own kernels against NumPy through the emulator, the LLVM JIT and the C backend, on several
launch shapes (a block of 48 threads has a last warp of 16 lanes); what stays refused, located."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

import polypy
from polypy.errors import UserError
from test_cooperative_groups import PRELUDE, _backends

# Each thread's partitions of its tile of 32 (by parity, by value mod 5) and of the coalesced
# group of the threads whose value is not a multiple of 3 (by bit 1): rank, size, the sum, the
# partition's first member's value, any/all, shfl_up/shfl_down/ballot, each written per thread.
PARTS = PRELUDE + r"""
#include <cooperative_groups/reduce.h>
__global__ void parts(const int* in, int* out, int n) {
  cg::thread_block_tile<32> t32 = cg::tiled_partition<32>(cg::this_thread_block());
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  int* o = out + 15 * i;
  auto odd = cg::binary_partition(t32, v & 1);
  o[0] = odd.thread_rank(); o[1] = odd.size(); o[2] = cg::reduce(odd, v, cg::plus<int>());
  auto five = cg::labeled_partition(t32, (unsigned)v % 5u);
  o[3] = five.thread_rank(); o[4] = five.size(); o[5] = five.shfl(v, 0);
  o[6] = five.any(v > 40); o[7] = five.all(v > 10);
  o[8] = cg::reduce(five, v, cg::greater<int>());
  if (v % 3 != 0) {
    cg::coalesced_group some = cg::coalesced_threads();
    auto two = cg::binary_partition(some, (v & 2) != 0);
    o[9] = two.thread_rank(); o[10] = two.size(); o[11] = cg::reduce(two, v, cg::plus<int>());
    o[12] = two.shfl_up(v, 1); o[13] = two.shfl_down(v, 2); o[14] = (int)two.ballot(v > 25);
  }
}
"""


def _parts_reference(values: np.ndarray, block: int) -> np.ndarray:
    out = np.full((len(values), 15), -1, np.int64)
    for i, v in enumerate(values):
        b0 = i - i % block
        w0 = b0 + (i - b0) // 32 * 32
        warp = values[w0:min(w0 + 32, b0 + block)]
        lane = i - w0
        odd = [j for j in range(len(warp)) if warp[j] % 2 == v % 2]
        five = [j for j in range(len(warp)) if warp[j] % 5 == v % 5]
        out[i, :9] = [odd.index(lane), len(odd), warp[odd].sum(), five.index(lane), len(five), warp[five[0]],
                      int(any(warp[five] > 40)), int(all(warp[five] > 10)), warp[five].max()]
        if v % 3:
            two = [j for j in range(len(warp)) if warp[j] % 3 and (warp[j] & 2) == (v & 2)]
            r = two.index(lane)
            up = warp[two[r - 1]] if r >= 1 else v
            down = warp[two[r + 2]] if r + 2 < len(two) else v
            ballot = sum(1 << k for k, j in enumerate(two) if warp[j] > 25)
            out[i, 9:] = [r, len(two), warp[two].sum(), up, down, ballot - (1 << 32 if ballot >= 1 << 31 else 0)]
    return out


@pytest.mark.parametrize("block", [32, 64, 48])
def test_binary_and_labeled_partitions_of_a_tile_and_of_a_coalesced_group(tmp_path, block) -> None:
    grid = 3
    rng = np.random.default_rng(block)
    values = rng.integers(0, 53, grid * block).astype(np.int32)
    args = {"in": values, "out": np.full(15 * grid * block, -1, np.int32), "n": grid * block}
    want = _parts_reference(values, block)
    for name, got in _backends(tmp_path, PARTS, "parts", grid, block, args):
        np.testing.assert_array_equal(got["out"].reshape(-1, 15), want, err_msg=name)


# Grid-stride loops whose trips differ between threads (n not a multiple of the launch's
# threads), with the warp's groups inside: a warp-aggregated increment over a coalesced group,
# and over a labeled partition of it (buckets), and odd/even sums over a binary partition of a
# tile synchronized at the end of each trip.
LOOPS = PRELUDE + r"""
#include <cooperative_groups/reduce.h>
__device__ int agg_inc(int* counter) {
  cg::coalesced_group active = cg::coalesced_threads();
  int res = 0;
  if (active.thread_rank() == 0) res = atomicAdd(counter, active.size());
  return active.shfl(res, 0) + active.thread_rank();
}
__device__ int agg_inc_bucket(int bucket, int* counters) {
  cg::coalesced_group active = cg::coalesced_threads();
  auto same = cg::labeled_partition(active, bucket);
  int res = 0;
  if (same.thread_rank() == 0) res = atomicAdd(&counters[bucket], same.size());
  return same.shfl(res, 0) + same.thread_rank();
}
__global__ void loops(const int* src, int* kept, int* nkept, int* slots, int* counters, int* sums,
                      unsigned int n) {
  cg::thread_block_tile<32> t32 = cg::tiled_partition<32>(cg::this_thread_block());
  cg::grid_group grid = cg::this_grid();
  for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < n; i += gridDim.x * blockDim.x) {
    if (src[i] > 20) kept[agg_inc(nkept)] = src[i];
    if (src[i] < 4) slots[agg_inc_bucket(src[i], counters)] = i;
  }
  // whole warps stop together here (the tile's sync() waits for all its lanes: CUDA requires them)
  for (int i = grid.thread_rank(); i < (n & ~31u); i += grid.size()) {
    int e = src[i];
    auto sub = cg::binary_partition(t32, e & 1);
    int s = cg::reduce(sub, e, cg::plus<int>());
    if (sub.thread_rank() == 0) atomicAdd(&sums[e & 1], s);
    cg::sync(t32);
  }
}
"""


@pytest.mark.parametrize("grid, block, n", [(3, 64, 1000), (2, 48, 301), (5, 32, 700)])
def test_warp_groups_in_grid_stride_loops_whose_trips_differ(tmp_path, grid, block, n) -> None:
    rng = np.random.default_rng(n)
    src = rng.integers(0, 30, n).astype(np.int32)
    starts = np.array([0, n, 2 * n, 3 * n], np.int32)  # bucket b's slots from b * n
    args = {"src": src, "kept": np.zeros(n, np.int32), "nkept": np.zeros(1, np.int32),
            "slots": np.full(4 * n, -1, np.int32), "counters": starts.copy(), "sums": np.zeros(2, np.int32),
            "n": n}
    for name, got in _backends(tmp_path, LOOPS, "loops", grid, block, args):
        big = src[src > 20]
        assert got["nkept"][0] == len(big), name
        np.testing.assert_array_equal(np.sort(got["kept"][:len(big)]), np.sort(big), err_msg=name)
        for b in range(4):
            where = np.flatnonzero(src == b)
            assert got["counters"][b] == starts[b] + len(where), name
            np.testing.assert_array_equal(np.sort(got["slots"][b * n:b * n + len(where)]), where, err_msg=name)
        head = src[:n & ~31]
        np.testing.assert_array_equal(got["sums"], [head[head % 2 == 0].sum(), head[head % 2 == 1].sum()],
                                      err_msg=name)


STILL_REFUSED = [
    # A constant mask names lanes that may have left the loop (undefined in CUDA).
    ("for (int j = threadIdx.x; j < n; j += 7) x[threadIdx.x] += __shfl_down_sync(0xffffffffu, x[j], 1);",
     "warp operation inside a loop whose trip count depends on the thread"),
    # A break out of the loop under a condition of the thread.
    ("for (int j = threadIdx.x; j < n; j += 7) { if (x[j] < 0) break; "
     "x[threadIdx.x] += cg::coalesced_threads().size(); }", "warp operation inside a loop whose trip count"),
]


@pytest.mark.parametrize("body, message", STILL_REFUSED)
def test_loops_that_stay_refused(tmp_path, body, message) -> None:
    src = tmp_path / "loop_refused.cu"
    src.write_text(PRELUDE + "__global__ void k(int* x, int n) {\n  " + body + "\n}\n")
    with pytest.raises(UserError, match=message) as info:
        polypy.compile(str(src))
    assert info.value.loc is not None and info.value.loc.line == 4


# A __syncwarp in a loop whose trips differ between the lanes of a warp: at the last trips some
# lanes of its mask have left the loop (undefined in CUDA); the launch stops with an error naming it.
PARTIAL_SYNC = r"""
#include <cstdio>
__global__ void k(int* x) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = 0;
  for (int j = 0; j < t % 4; j++) {
    s[t] += j;
    __syncwarp();
    x[t] += s[t ^ 1];
  }
}
int main() {
  int* x;
  cudaMallocManaged(&x, 64 * sizeof(int));
  for (int i = 0; i < 64; i++) x[i] = 0;
  k<<<1, 64>>>(x);
  printf("%s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  return 0;
}
"""


@pytest.mark.parametrize("mode", ["compiled", "emulated"])
def test_a_syncwarp_some_lanes_of_its_mask_skip_stops_the_launch(tmp_path, mode) -> None:
    if mode == "compiled" and shutil.which("c++") is None:
        pytest.skip("no C++ compiler (c++) to build the translated program")
    src = tmp_path / "partial_sync.cu"
    src.write_text(PARTIAL_SYNC)
    result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run"] + (["--emulate"] if mode == "emulated"
                                                                                 else []) + [str(src)],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "device-side assert triggered", result.stdout + result.stderr
    assert "partial_sync.cu:9: k: block: [0,0,0]" in result.stderr
    assert "every lane of this __syncwarp's mask reaches it" in result.stderr
