"""CUDA's integer intrinsics, ``clock()``, ``__nanosleep`` and <cmath>'s INFINITY / NAN in device
code (issue 36, item 7).

Every intrinsic runs on all pairs of edge values (0, 1, all ones, INT_MIN, INT_MAX, shift counts
of 31, 32, 33 and above, selectors with high bits set) and is checked bit for bit against a
Python reference written from the CUDA Math API / PTX definitions, through the emulator, the LLVM
JIT and the C backend.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import copy_args, run_c, run_emulated

M32, M64 = (1 << 32) - 1, (1 << 64) - 1

INTRINSICS = r"""
#include <cmath>
__global__ void ints(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* r32,
                     unsigned long long* r64, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned x = a[i], y = b[i], z = c[i];
  unsigned* o = r32 + 20 * i;
  o[0] = __brev(x);
  o[1] = __byte_perm(x, y, z);
  o[2] = __funnelshift_l(x, y, z);
  o[3] = __funnelshift_lc(x, y, z);
  o[4] = __funnelshift_r(x, y, z);
  o[5] = __funnelshift_rc(x, y, z);
  o[6] = __umulhi(x, y);
  o[7] = (unsigned)__mulhi((int)x, (int)y);
  o[8] = __sad((int)x, (int)y, z);
  o[9] = __usad(x, y, z);
  o[10] = (unsigned)__hadd((int)x, (int)y);
  o[11] = (unsigned)__rhadd((int)x, (int)y);
  o[12] = __uhadd(x, y);
  o[13] = __urhadd(x, y);
  o[14] = __popc(x);
  o[15] = __clz((int)x);
  o[16] = __ffs((int)x);
  o[17] = __popcll(((unsigned long long)x << 32) | y);
  o[18] = __clzll((long long)(((unsigned long long)x << 32) | y));
  o[19] = __ffsll((long long)(((unsigned long long)x << 32) | y));
  unsigned long long u = ((unsigned long long)x << 32) | z, v = ((unsigned long long)y << 32) | x;
  unsigned long long* p = r64 + 4 * i;
  p[0] = __brevll(u);
  p[1] = __umul64hi(u, v);
  p[2] = (unsigned long long)__mul64hi((long long)u, (long long)v);
  p[3] = (unsigned long long)__mul64hi((long long)v, (long long)z);
}
"""

EDGES = [0, 1, 2, M32, 0x80000000, 0x7FFFFFFF, 0x80000001, 0x12345678, 0xDEADBEEF, 31, 32, 33, 64, 0x3210,
         0x76543210, 0xFFFF7654]


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) else v


def _reference(x: int, y: int, z: int) -> tuple[list[int], list[int]]:
    sx, sy = _signed(x, 32), _signed(y, 32)
    both = (y << 32) | x
    perm = sum(((both >> (8 * ((z >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4))
    xy = (x << 32) | y
    popcll = bin(xy).count("1")
    o = [int(f"{x:032b}"[::-1], 2), perm,
         ((both << (z & 31)) >> 32) & M32, ((both << min(z, 32)) >> 32) & M32,
         (both >> (z & 31)) & M32, (both >> min(z, 32)) & M32,
         (x * y) >> 32, ((sx * sy) >> 32) & M32,
         (abs(sx - sy) + z) & M32, (abs(x - y) + z) & M32,
         ((sx + sy) >> 1) & M32, ((sx + sy + 1) >> 1) & M32, (x + y) >> 1, (x + y + 1) >> 1,
         bin(x).count("1"), 32 - x.bit_length(), (x & -x).bit_length(),
         popcll, 64 - xy.bit_length(), (xy & -xy).bit_length()]
    u, v = (x << 32) | z, (y << 32) | x
    p = [int(f"{u:064b}"[::-1], 2), (u * v) >> 64, ((_signed(u, 64) * _signed(v, 64)) >> 64) & M64,
         ((_signed(v, 64) * z) >> 64) & M64]
    return o, p


def _inputs() -> dict:
    pairs = [(x, y) for x in EDGES for y in EDGES]
    a = np.array([x for x, _ in pairs], np.uint32)
    b = np.array([y for _, y in pairs], np.uint32)
    # Third operands: shift counts and selectors (below, at and above 32, high bits set).
    c = np.array([EDGES[(3 * k + 5) % len(EDGES)] for k in range(len(pairs))], np.uint32)
    count = len(pairs)
    return {"a": a, "b": b, "c": c, "r32": np.zeros(20 * count, np.uint32), "r64": np.zeros(4 * count, np.uint64),
            "n": count}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("builtins") / "ints.cu"
    path.write_text(INTRINSICS)
    return path


@pytest.mark.parametrize("way", ["emulator", "llvm", "c"])
def test_integer_intrinsics_are_exact_on_edge_values(source, way: str) -> None:
    args = _inputs()
    if way == "llvm":
        out = copy_args(args)
        polypy.compile(str(source)).ints[3, 128](*out.values())
    else:
        kernel = polypy.load(str(source)).kernel("ints")
        out = (run_emulated if way == "emulator" else run_c)(kernel, 3, 128, args)
    r32 = out["r32"].reshape(-1, 20)
    r64 = out["r64"].reshape(-1, 4)
    for i in range(args["n"]):
        x, y, z = int(args["a"][i]), int(args["b"][i]), int(args["c"][i])
        want32, want64 = _reference(x, y, z)
        assert [int(v) for v in r32[i]] == want32, (hex(x), hex(y), hex(z))
        assert [int(v) for v in r64[i]] == want64, (hex(x), hex(y), hex(z))


CLOCKS = r"""
#include <cmath>
__device__ long long wait(long long n) {
  long long t0 = clock64();
  while (clock64() - t0 < n) __nanosleep(100);
  return clock64() - t0;
}
__global__ void clocks(long long* t, float* f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  long start = clock();
  long long waited = wait(i % 5);
  long stop = clock();
  t[3 * i] = waited;
  t[3 * i + 1] = stop - start;
  t[3 * i + 2] = stop >= start;
  f[4 * i] = -INFINITY;
  f[4 * i + 1] = i % 2 ? HUGE_VALF : (float)INFINITY;
  f[4 * i + 2] = NAN;
  f[4 * i + 3] = (i < 3 ? (float)-HUGE_VAL : 1.0f) + (float)i;
}
"""


@pytest.mark.parametrize("way", ["emulator", "llvm", "c"])
def test_clock_counts_reads_and_math_constants(tmp_path, way: str) -> None:
    """``clock()``/``clock64()`` count the thread's reads: a busy-wait on them ends, after
    exactly as many reads as it asked for; ``__nanosleep`` changes nothing; INFINITY, HUGE_VAL(F)
    and NAN from <cmath> are the constants in device code."""
    path = tmp_path / "clocks.cu"
    path.write_text(CLOCKS)
    count = 37
    args = {"t": np.zeros(3 * count, np.int64), "f": np.zeros(4 * count, np.float32), "n": count}
    if way == "llvm":
        out = copy_args(args)
        polypy.compile(str(path)).clocks[2, 32](*out.values())
    else:
        kernel = polypy.load(str(path)).kernel("clocks")
        out = (run_emulated if way == "emulator" else run_c)(kernel, 2, 32, args)
    t = out["t"].reshape(-1, 3)
    i = np.arange(count)
    wait = np.maximum(i % 5, 1)  # the loop reads once more than it waits, at least once
    np.testing.assert_array_equal(t[:, 0], wait + 1)
    np.testing.assert_array_equal(t[:, 1], wait + 3)  # the wait's reads, its own first and last, then stop
    np.testing.assert_array_equal(t[:, 2], 1)
    f = out["f"].reshape(-1, 4)
    np.testing.assert_array_equal(f[:, 0], -np.inf)
    np.testing.assert_array_equal(f[:, 1], np.inf)
    assert np.isnan(f[:, 2]).all()
    np.testing.assert_array_equal(f[:, 3], np.where(i < 3, -np.inf, 1.0 + i).astype(np.float32))


def test_cuda_printer_writes_the_intrinsics_as_plain_c(source, tmp_path) -> None:
    """The intrinsics are plain IR: the CUDA text of the kernel reads back and computes the same."""
    from codegen.cuda import print_cuda_kernel

    text = print_cuda_kernel(polypy.load(str(source)).kernel("ints"))
    assert "__byte_perm" not in text and "__funnelshift" not in text
    again = tmp_path / "again.cu"
    again.write_text(text)
    args = _inputs()
    out = run_emulated(polypy.load(str(again)).kernel("ints"), 3, 128, args)
    want = np.array([_reference(int(x), int(y), int(z))[0] for x, y, z in zip(args["a"], args["b"], args["c"])],
                    np.uint32)
    np.testing.assert_array_equal(out["r32"].reshape(-1, 20), want)
