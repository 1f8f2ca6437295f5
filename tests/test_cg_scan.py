"""cg::inclusive_scan and cg::exclusive_scan (<cooperative_groups/scan.h>, frontend/lower/scans.py)
over tiles of 1 to 128 threads and coalesced groups, with CUDA's operators and lambdas, for int,
unsigned, float and double: our own kernels against NumPy (sequential prefix sums, minima,
maxima, bit operations per tile) through the emulator, the LLVM JIT and the C backend, on
several launch shapes; the 16-bit atomicCAS; what stays refused, located."""
from __future__ import annotations

import numpy as np
import pytest

from c_support import assert_load_refused, run_way
from test_cooperative_groups import _backends

PRELUDE = ("#include <cooperative_groups.h>\n#include <cooperative_groups/scan.h>\n"
           "namespace cg = cooperative_groups;\n")

# Every thread writes its tile's scans: 8 ints per thread.
INT_SCANS = PRELUDE + r"""
template <int N>
__device__ void scans(const int* in, int* out, unsigned m) {
  cg::thread_block_tile<N> t = cg::tiled_partition<N>(cg::this_thread_block());
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  int* o = out + 8 * i;
  o[0] = cg::inclusive_scan(t, v);
  o[1] = cg::exclusive_scan(t, v);
  o[2] = cg::inclusive_scan(t, v, cg::less<int>());
  o[3] = cg::inclusive_scan(t, v, cg::greater<int>());
  o[4] = cg::inclusive_scan(t, v, cg::bit_xor<int>());
  o[5] = cg::exclusive_scan(t, v, cg::bit_or<int>());
  o[6] = (int)cg::inclusive_scan(t, (unsigned)v, [m](unsigned a, unsigned b) { return (a + b) % m; });
  o[7] = (int)cg::exclusive_scan(t, (unsigned)v, cg::plus<unsigned>());
}
#define KERNEL(N) __global__ void scan_##N(const int* in, int* out, unsigned m) { scans<N>(in, out, m); }
KERNEL(1) KERNEL(4) KERNEL(16) KERNEL(32) KERNEL(64) KERNEL(128)
"""


def _segments(n: int, block: int, size: int) -> list[range]:
    """The tiles of ``size`` threads of each block of ``block`` threads (a last tile cut short)."""
    out = []
    for b0 in range(0, n, block):
        for t0 in range(b0, b0 + block, size):
            out.append(range(t0, min(t0 + size, b0 + block)))
    return out


def _int_reference(values: np.ndarray, block: int, size: int, m: int) -> np.ndarray:
    out = np.zeros((len(values), 8), np.int64)
    for seg in _segments(len(values), block, size):
        v = values[seg.start:seg.stop].astype(np.int64)
        inc = np.cumsum(v)
        out[seg.start:seg.stop, 0] = inc
        out[seg.start:seg.stop, 1] = inc - v
        out[seg.start:seg.stop, 2] = np.minimum.accumulate(v)
        out[seg.start:seg.stop, 3] = np.maximum.accumulate(v)
        out[seg.start:seg.stop, 4] = np.bitwise_xor.accumulate(v)
        ors = np.bitwise_or.accumulate(v)
        out[seg.start:seg.stop, 5] = np.concatenate([[0], ors[:-1]])
        acc = None
        for k in seg:  # the lambda is called on unsigned values (negative ones wrap)
            u = int(values[k]) & 0xFFFFFFFF
            acc = u if acc is None else ((acc + u) & 0xFFFFFFFF) % m  # unsigned arithmetic wraps
            out[k, 6] = acc - (1 << 32 if acc >= 1 << 31 else 0)
        out[seg.start:seg.stop, 7] = inc - v
    return out


# The default tier runs a small tile and a big one, each the last of its block cut short; the
# extended tier (tests/extended_tier.txt) the other sizes and shapes.
@pytest.mark.parametrize("size,block", [(16, 48), (64, 96)])
def test_tile_scans_with_cuda_operators_and_a_lambda_against_numpy(tmp_path, size, block) -> None:
    _check_tile_scans(tmp_path, size, block)


@pytest.mark.parametrize("size,block", [(1, 32), (4, 32), (32, 64), (32, 48), (64, 128), (128, 256)])
def test_tile_scans_of_more_sizes_and_shapes(tmp_path, size, block) -> None:
    _check_tile_scans(tmp_path, size, block)


def _check_tile_scans(tmp_path, size: int, block: int) -> None:
    grid = 2
    rng = np.random.default_rng(size * 1000 + block)
    values = rng.integers(-60, 60, grid * block).astype(np.int32)
    args = {"in": values, "out": np.full(8 * grid * block, -1, np.int32), "m": np.uint32(97)}
    want = _int_reference(values, block, size, 97)
    for name, got in _backends(tmp_path, INT_SCANS, f"scan_{size}", grid, block, args):
        np.testing.assert_array_equal(got["out"].reshape(-1, 8), want, err_msg=f"{name} tile {size} block {block}")


# Float and double scans of a tile: sums (combined in rank order, the lowest first, as
# np.cumsum adds), minima and maxima; a lambda over doubles.
FLOAT_SCANS = PRELUDE + r"""
template <int N>
__device__ void scans(const float* x, const double* y, float* f, double* d) {
  cg::thread_block_tile<N> t = cg::tiled_partition<N>(cg::this_thread_block());
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  f[4 * i] = cg::inclusive_scan(t, x[i]);
  f[4 * i + 1] = cg::exclusive_scan(t, x[i], cg::plus<float>());
  f[4 * i + 2] = cg::inclusive_scan(t, x[i], cg::less<float>());
  f[4 * i + 3] = cg::exclusive_scan(t, x[i]);
  d[3 * i] = cg::inclusive_scan(t, y[i], cg::plus<double>());
  d[3 * i + 1] = cg::inclusive_scan(t, y[i], cg::greater<double>());
  d[3 * i + 2] = cg::inclusive_scan(t, y[i], [](const double& a, const double& b) { return a < b ? a : b; });
}
#define KERNEL(N) __global__ void fscan_##N(const float* x, const double* y, float* f, double* d) { \
  scans<N>(x, y, f, d); }
KERNEL(8) KERNEL(32) KERNEL(64)
"""


@pytest.mark.parametrize("size,block", [(32, 48)])
def test_float_and_double_scans_add_in_rank_order(tmp_path, size, block) -> None:
    _check_float_scans(tmp_path, size, block)


@pytest.mark.parametrize("size,block", [(8, 32), (64, 128)])
def test_float_and_double_scans_of_more_sizes(tmp_path, size, block) -> None:
    _check_float_scans(tmp_path, size, block)


def _check_float_scans(tmp_path, size: int, block: int) -> None:
    grid = 2
    rng = np.random.default_rng(size + block)
    x = rng.standard_normal(grid * block).astype(np.float32) * 1000
    y = rng.standard_normal(grid * block)
    args = {"x": x, "y": y, "f": np.zeros(4 * grid * block, np.float32), "d": np.zeros(3 * grid * block)}
    wf = np.zeros((grid * block, 4), np.float32)
    wd = np.zeros((grid * block, 3))
    for seg in _segments(grid * block, block, size):
        s = slice(seg.start, seg.stop)
        inc = np.cumsum(x[s], dtype=np.float32)  # sequential float32 additions, the lowest rank first
        exc = np.concatenate([[np.float32(0)], inc[:-1]])
        wf[s] = np.stack([inc, exc, np.minimum.accumulate(x[s]), exc], axis=1)
        wd[s] = np.stack([np.cumsum(y[s]), np.maximum.accumulate(y[s]), np.minimum.accumulate(y[s])], axis=1)
    for name, got in _backends(tmp_path, FLOAT_SCANS, f"fscan_{size}", grid, block, args):
        np.testing.assert_array_equal(got["f"].reshape(-1, 4), wf, err_msg=f"{name} tile {size} block {block}")
        np.testing.assert_array_equal(got["d"].reshape(-1, 3), wd, err_msg=f"{name} tile {size} block {block}")


# A coalesced group (the threads whose value is not a multiple of 3) and a binary partition of a
# tile: the members' scans in rank (lane) order; a stream compaction by the exclusive count.
COALESCED = PRELUDE + r"""
__global__ void cscan(const int* in, int* out, int* packed, int* count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  int* o = out + 4 * i;
  if (v % 3 != 0) {
    cg::coalesced_group g = cg::coalesced_threads();
    o[0] = cg::inclusive_scan(g, v);
    o[1] = cg::exclusive_scan(g, v, cg::plus<int>());
    o[2] = cg::inclusive_scan(g, v, [](int a, int b) { return a > b ? a : b; });
    int at = cg::exclusive_scan(g, 1);
    int base = 0;
    if (g.thread_rank() == 0) base = atomicAdd(count, (int)g.size());
    base = g.shfl(base, 0);
    packed[base + at] = v;
  }
  auto half = cg::binary_partition(cg::tiled_partition<16>(cg::this_thread_block()), v > 0);
  o[3] = cg::exclusive_scan(half, v, cg::bit_xor<int>());
}
"""


def _coalesced_reference(values: np.ndarray, block: int) -> np.ndarray:
    out = np.full((len(values), 4), -1, np.int64)
    for warp in _segments(len(values), block, 32):
        members = [k for k in warp if values[k] % 3 != 0]
        for r, k in enumerate(members):
            before = values[members[:r]].astype(np.int64)
            out[k, 0] = before.sum() + values[k]
            out[k, 1] = before.sum()
            out[k, 2] = max(list(before) + [values[k]])
    for tile in _segments(len(values), block, 16):
        for k in tile:
            same = [j for j in tile if j < k and (values[j] > 0) == (values[k] > 0)]
            out[k, 3] = np.bitwise_xor.reduce(values[same].astype(np.int64)) if same else 0
    return out


@pytest.mark.parametrize("block", [32, 48, 64])
def test_coalesced_group_and_partition_scans_and_a_stream_compaction(tmp_path, block) -> None:
    grid = 3
    rng = np.random.default_rng(block)
    values = rng.integers(-50, 50, grid * block).astype(np.int32)
    args = {"in": values, "out": np.full(4 * grid * block, -1, np.int32),
            "packed": np.full(grid * block, -999, np.int32), "count": np.zeros(1, np.int32)}
    want = _coalesced_reference(values, block)
    keep = values[values % 3 != 0]
    for name, got in _backends(tmp_path, COALESCED, "cscan", grid, block, args):
        np.testing.assert_array_equal(got["out"].reshape(-1, 4), want, err_msg=name)
        assert got["count"][0] == len(keep), name
        np.testing.assert_array_equal(np.sort(got["packed"][:len(keep)]), np.sort(keep), err_msg=name)
        assert (got["packed"][len(keep):] == -999).all(), name


# The 16-bit compare-and-swap (sm_70 and later): first-come claims of two slots, and a retry loop
# adding 1000 to a 16-bit counter (it wraps past 65535) once per thread.
CAS16 = r"""
__global__ void cas16(unsigned short* a, unsigned short* old) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  old[i] = atomicCAS(&a[i % 2], (unsigned short)0, (unsigned short)(i + 65000));
  unsigned short seen = atomicCAS(&a[2], (unsigned short)0xFFFF, (unsigned short)0xFFFF), want;
  do {
    want = seen;
    seen = atomicCAS(&a[2], want, (unsigned short)(want + 1000));
  } while (seen != want);
}
"""


@pytest.mark.parametrize("grid,block", [(1, 64), (2, 48)])
def test_16_bit_atomic_cas(tmp_path, grid, block) -> None:
    n = grid * block
    args = {"a": np.array([0, 0, 30000], np.uint16), "old": np.full(n, 7, np.uint16)}
    for name, got in _backends(tmp_path, CAS16, "cas16", grid, block, args):
        assert got["a"][2] == (30000 + 1000 * n) % 65536, name  # every thread added once
        for slot in (0, 1):  # one thread of each parity claimed its slot and saw 0; the others saw it
            mine = np.arange(slot, n, 2)
            winners = mine[got["old"][mine] == 0]
            assert len(winners) == 1, name
            assert got["a"][slot] == winners[0] + 65000, name
            assert (got["old"][mine[mine != winners[0]]] == winners[0] + 65000).all(), name


@pytest.mark.parametrize("body,message,where", [
    ("o[i] = cg::inclusive_scan(cg::this_thread_block(), v);",
     "cg::inclusive_scan over a thread_block: only thread_block_tile and coalesced_group", (7, 29)),
    ("o[i] = cg::exclusive_scan(t, v, [](auto a, auto b) { return a + b; });",
     "cg::exclusive_scan with a generic lambda is not supported", (7, 35)),
    ("int calls = 0;\n  o[i] = cg::inclusive_scan(t, v, [calls](int a, int b) mutable { ++calls; return a + b; });",
     "cg::inclusive_scan with a mutable lambda", (8, 35)),
    ("o[i] = cg::inclusive_scan(t, v, cg::plus<long long>());",
     "an operator of another type than the value is not supported", (7, 35)),
    ("struct Add { __device__ int operator()(int a, int b) const { return a + b; } };\n"
     "  o[i] = cg::inclusive_scan(t, v, Add());",
     "cg::inclusive_scan with an operator of type 'Add'", (8, 35)),
])
def test_scans_that_stay_refused_are_located(tmp_path, body, message, where) -> None:
    source = PRELUDE + (
        "__global__ void k(const int* in, int* o) {\n"
        "  auto t = cg::tiled_partition<32>(cg::this_thread_block());\n"
        "  int i = threadIdx.x, v = in[i];\n"
        f"  {body}\n}}\n")
    assert_load_refused(tmp_path, "refused", source, message, where)


# A grid-stride loop whose trips differ between threads (n not a multiple of the launch's
# threads), a coalesced group's exclusive scan in it: at the last trip the group is the lanes
# still in the loop (gpu2cpu/uniform_warp_loops.py). The LLVM backend refuses such a loop around
# warp operations (located), as it does for cg::reduce there.
LOOP = PRELUDE + r"""
__global__ void loop_scan(const int* in, int* o, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    cg::coalesced_group g = cg::coalesced_threads();
    o[i] = cg::exclusive_scan(g, in[i]) + 1000 * (int)g.size();
  }
}
"""


@pytest.mark.parametrize("block,n", [(32, 100), (48, 150)])
def test_coalesced_scan_in_a_loop_whose_trips_differ(block, n) -> None:
    grid = 2
    values = np.random.default_rng(n).integers(-9, 9, n).astype(np.int32)
    want = np.zeros(n, np.int64)
    stride = grid * block
    for start in range(0, n, stride):  # each trip: the warps of each block, the lanes still in the loop
        for b in range(grid):
            for w0 in range(0, block, 32):
                lanes = [start + b * block + t for t in range(w0, min(w0 + 32, block)) if start + b * block + t < n]
                run = 0
                for i in lanes:
                    want[i] = run + 1000 * len(lanes)
                    run += values[i]
    for way in ("emulator", "c"):
        got = run_way(LOOP, "loop_scan", grid, block, {"in": values, "o": np.zeros(n, np.int32), "n": n}, way)
        np.testing.assert_array_equal(got["o"], want, err_msg=way)
