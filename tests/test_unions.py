"""Unions in memory (docs/typed_views.md, "Unions in memory"): a union's storage is a pool of its
bytes, each member a typed view of it at offset 0, so a member read after a write through another
is the bit reinterpretation CUDA gives. Our own kernels, through the emulator (with its race
check), the LLVM JIT and the C backend, on two launch shapes each, bit for bit against NumPy's
``.view``: a local union of members of other sizes (floats, a double and a 64-bit word: NaN
payloads, -0.0), a ``__shared__`` array of unions read across threads after a barrier, a
CUB-style ``__shared__`` union of ``TempStorage``s used by BlockReduce then BlockScan, a union
member of a global record array; the isl accesses of the shared pool exact; refusals located."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import copy_args, run_c
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir.visitor import walk_block

WAYS = ["emulator", "llvm", "c"]

SOURCE = r"""
#include <cub/cub.cuh>
union FU { float f; unsigned int u; };
struct Item { int tag; union { float f; unsigned int u; } v; union { int i; float g; }; };  // the last anonymous

__global__ void punning(const float* x, unsigned int* bits, float* back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    union { float f[2]; double d; unsigned long long w; } p;   // members of other sizes
    p.f[0] = x[i];
    p.f[1] = -x[i];
    bits[2 * i] = (unsigned int)(p.w & 0xffffffffull);
    bits[2 * i + 1] = (unsigned int)(p.w >> 32);
    p.w ^= 0x8000000000000000ull;                             // the sign of f[1] through the word
    back[i] = p.f[1];
  }
}

__global__ void phases(const int* x, int* sums, int* scans) {
  typedef cub::BlockReduce<int, 64> BlockReduceT;
  typedef cub::BlockScan<int, 64> BlockScanT;
  __shared__ union { typename BlockReduceT::TempStorage reduce; typename BlockScanT::TempStorage scan; } temp;
  int i = blockIdx.x * 64 + threadIdx.x;
  int v = x[i];
  int s = BlockReduceT(temp.reduce).Sum(v);
  if (threadIdx.x == 0) sums[blockIdx.x] = s;
  __syncthreads();
  int e;
  BlockScanT(temp.scan).ExclusiveSum(v, e);
  scans[i] = e;
}

__global__ void shared_pun(const float* x, unsigned int* bits, int n) {
  __shared__ FU s[64];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t].f = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) bits[i] = s[blockDim.x - 1 - t].u;
}

__global__ void shared_wide(const float* x, double* d, int* expo) {
  __shared__ union { float f[64]; double d[32]; unsigned long long w[32]; } pool;  // 256 bytes, 8-aligned
  int t = threadIdx.x, half = blockDim.x / 2;
  pool.f[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  if (t < half) {
    d[blockIdx.x * half + t] = pool.d[t];                   // two floats' bits as one double
    expo[blockIdx.x * half + t] = (int)((pool.w[half - 1 - t] >> 52) & 0x7ff);
  }
}

__global__ void atomics(unsigned int* words, float* total) {
  __shared__ FU acc;
  if (threadIdx.x == 0) acc.f = 0.5f;
  __syncthreads();
  atomicAdd(&acc.f, 1.0f);                       // a float member of the pool: a float add
  atomicAdd((float*)words + blockIdx.x, 0.25f);  // (a float view of unsigned memory: the same)
  __syncthreads();
  if (threadIdx.x == 0) total[blockIdx.x] = acc.f;
}

__global__ void records(Item* items, unsigned int* bits, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    bits[i] = items[i].v.u;
    if (items[i].tag) items[i].v.u = items[i].v.u ^ 0x80000000u;
    else items[i].v.f = 2.0f * items[i].v.f;
    items[i].g = -items[i].g;                     // the sign bit of the anonymous union's int
  }
}
"""

ITEM = np.dtype([("tag", np.int32), ("v", np.uint32), ("i", np.int32)])  # `struct Item` with the C layout


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("unions") / "unions.cu"
    path.write_text(SOURCE)
    return str(path)


def _run(source: str, kernel: str, grid, block, args: dict, way: str) -> dict:
    if way == "emulator":
        out = copy_args(args)
        emulate(polypy.load(source).kernel(kernel), grid, block, out, check_races=True)
        return out
    if way == "c":
        return run_c(polypy.load(source).kernel(kernel), grid, block, args)
    out = copy_args(args)
    getattr(polypy.compile(source), kernel)[grid, block](*out.values())
    return out


def _special_floats(n: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    special = np.array([0x7fc12345, 0xffa00001, 0x7f800001, 0x80000000, 0x00000000, 0x7f800000, 0xff800000,
                        0x00000001, 0x807fffff], np.uint32).view(np.float32)  # NaN payloads, sNaN, -0.0, denormals
    x = rng.standard_normal(n).astype(np.float32)
    x[:len(special)] = special
    return x


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("shape", [(1, 32), (3, 24)])
@pytest.mark.parametrize("way", WAYS)
def test_a_local_union_of_other_sizes_is_its_bytes(source, way: str, shape) -> None:
    grid, block = shape
    n = grid * block - 5
    x = _special_floats(grid * block)
    args = {"x": x, "bits": np.zeros(2 * grid * block, np.uint32), "back": np.zeros(grid * block, np.float32),
            "n": n}
    got = _run(source, "punning", grid, block, args, way)
    xb = x[:n].view(np.uint32)
    want_bits = np.zeros(2 * grid * block, np.uint32)
    want_bits[0:2 * n:2] = xb
    want_bits[1:2 * n:2] = xb ^ np.uint32(0x80000000)  # -x: the sign bit flipped (NaNs too)
    np.testing.assert_array_equal(got["bits"], want_bits)
    want_back = np.zeros(grid * block, np.float32)
    want_back[:n] = x[:n]  # -(-x) through the word's sign bit: the same bits
    _same_bits(got["back"], want_back)


@pytest.mark.parametrize("shape", [(1, 64), (2, 40)])
@pytest.mark.parametrize("way", WAYS)
def test_a_shared_array_of_unions_read_as_another_member(source, way: str, shape) -> None:
    grid, block = shape
    n = grid * block - 3
    x = _special_floats(grid * block)
    got = _run(source, "shared_pun", grid, block, {"x": x, "bits": np.zeros(grid * block, np.uint32), "n": n}, way)
    xs = np.where(np.arange(grid * block) < n, x.view(np.uint32), np.uint32(0)).reshape(grid, block)
    want = xs[:, ::-1].reshape(-1).copy()
    want[n:] = 0
    np.testing.assert_array_equal(got["bits"], want)


@pytest.mark.parametrize("shape", [(1, 64), (3, 32)])
@pytest.mark.parametrize("way", WAYS)
def test_a_shared_union_read_through_a_wider_member(source, way: str, shape) -> None:
    grid, block = shape
    half = block // 2
    bits = np.random.default_rng(3).integers(0, 2**32, grid * block, dtype=np.uint64).astype(np.uint32)
    bits[1:8:2] = [0x7ff00000, 0xfff80000, 0x80000000, 0x7ff40000]  # high words: inf, qNaN, -0.0, sNaN
    bits[0:8:2] = [0, 0xdead, 0, 1]
    x = bits.view(np.float32)
    args = {"x": x, "d": np.zeros(grid * half), "expo": np.zeros(grid * half, np.int32)}
    got = _run(source, "shared_wide", grid, block, args, way)
    words = x.view(np.uint64)  # element t of block b: floats 2t, 2t+1 of that block, little-endian
    np.testing.assert_array_equal(got["d"].view(np.uint64), words)
    want_expo = ((words.reshape(grid, half)[:, ::-1] >> np.uint64(52)) & np.uint64(0x7ff)).astype(np.int32)
    np.testing.assert_array_equal(got["expo"], want_expo.reshape(-1))


@pytest.mark.parametrize("shape", [(1, 32), (3, 20)])
@pytest.mark.parametrize("way", WAYS)
def test_float_atomics_on_a_union_member_add_floats(source, way: str, shape) -> None:
    """Both were integer additions of the float's bits before (a wrong answer)."""
    grid, block = shape
    words = np.full(grid, 2.0, np.float32).view(np.uint32)
    got = _run(source, "atomics", grid, block, {"words": words, "total": np.zeros(grid, np.float32)}, way)
    np.testing.assert_array_equal(got["total"], np.full(grid, 0.5 + block, np.float32))
    np.testing.assert_array_equal(got["words"].view(np.float32), np.full(grid, 2.0 + 0.25 * block, np.float32))


def test_shared_unions_keep_isl_exact(source) -> None:
    """The pool's accesses are affine accesses to its elements (a wider member: the elements it
    covers), so isl stays exact and the barriers the reversed reads need are kept."""
    from polypy.poly import build_model

    for kernel, pool in (("shared_pun", "s"), ("shared_wide", "pool")):
        k = polypy.load(source).kernel(kernel)
        shared = [a for a in build_model(k).accesses if a.space == "shared"]
        assert {a.buffer for a in shared} == {pool}, kernel
        assert all(a.index_exact for a in shared), [a.text for a in shared if not a.index_exact]
        assert len([s for s in walk_block(k.body) if isinstance(s, n.Barrier)]) == 1, kernel


@pytest.mark.parametrize("grid", [1, 3])
@pytest.mark.parametrize("way", WAYS)
def test_a_shared_union_of_cub_temp_storages_in_two_phases(source, way: str, grid: int) -> None:
    x = np.random.default_rng(9).integers(-50, 50, 64 * grid).astype(np.int32)
    args = {"x": x, "sums": np.zeros(grid, np.int32), "scans": np.zeros(64 * grid, np.int32)}
    got = _run(source, "phases", grid, 64, args, way)
    blocks = x.reshape(grid, 64)
    np.testing.assert_array_equal(got["sums"], blocks.sum(axis=1))
    want = (np.cumsum(blocks, axis=1) - blocks).reshape(-1)
    np.testing.assert_array_equal(got["scans"][np.arange(64 * grid) % 64 != 0], want[np.arange(64 * grid) % 64 != 0])


@pytest.mark.parametrize("shape", [(1, 32), (2, 48)])
@pytest.mark.parametrize("way", WAYS)
def test_a_union_member_of_a_global_record_array(source, way: str, shape) -> None:
    grid, block = shape
    n = grid * block - 7
    items = np.zeros(grid * block, ITEM)
    items["tag"] = np.arange(grid * block) % 3 == 0
    items["v"] = _special_floats(grid * block).view(np.uint32)
    items["i"] = np.arange(grid * block) * 1000003 + 7  # small positive: no NaN among their floats
    # (its unions cover every byte: one buffer of 32-bit elements, each member a view of its bytes)
    args = {"items": items.view(np.int32).copy(), "bits": np.zeros(grid * block, np.uint32), "n": n}
    got = _run(source, "records", grid, block, args, way)
    got["items"] = got["items"].view(ITEM)
    want_bits = np.zeros(grid * block, np.uint32)
    want_bits[:n] = items["v"][:n]
    np.testing.assert_array_equal(got["bits"], want_bits)
    v = items["v"].copy()
    tagged = (items["tag"] != 0) & (np.arange(grid * block) < n)
    plain = (items["tag"] == 0) & (np.arange(grid * block) < n)
    v[tagged] ^= np.uint32(0x80000000)
    v[plain] = (np.float32(2) * items["v"][plain].view(np.float32)).view(np.uint32)
    np.testing.assert_array_equal(got["items"]["tag"], items["tag"])
    want_i = items["i"].view(np.uint32).copy()
    want_i[:n] ^= np.uint32(0x80000000)
    np.testing.assert_array_equal(got["items"]["i"].view(np.uint32), want_i)
    got_v = got["items"]["v"]
    quiet = plain & np.isnan(items["v"].view(np.float32))  # 2 * NaN: a NaN (its payload is the FPU's)
    np.testing.assert_array_equal(got_v[~quiet], v[~quiet])
    assert np.isnan(got_v[quiet].view(np.float32)).all()


WORD_AND_HALVES = r"""
struct R { union { int w; struct { unsigned short a; unsigned short b; }; }; int out; char tag; };
__global__ void halves(R* r, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    R* p = r + i;
    p->b = (unsigned short)(p->out & 0xffff);   // a 16-bit store into the word...
    p->out = p->w;                              // ...then the word read whole
}
"""
R_DTYPE = np.dtype({"names": ["w", "out", "tag"], "formats": ["<i4", "<i4", "i1"], "offsets": [0, 4, 8],
                    "itemsize": 12})


@pytest.mark.parametrize("way", WAYS)
def test_a_store_to_half_a_word_then_the_word_read_whole(way: str) -> None:
    """A global record whose union leaves bytes uncovered: its members are views of one memory
    through pointers of several types. The C backend turns off strict aliasing (the emitted
    file's pragma, c_fp_contract.h.j2): with it, GCC read the word before the 16-bit store."""
    from c_support import run_way

    n = 61
    records = np.zeros(64, R_DTYPE)
    records["w"] = np.arange(64) * 65537 + 3
    records["out"] = np.arange(64) * 7 + 1
    want = records.copy()
    word = (want["w"].view(np.uint32) & 0xffff) | ((want["out"].view(np.uint32) & 0xffff) << 16)
    want["w"][:n] = word[:n].astype(np.uint32).view(np.int32)
    want["out"][:n] = want["w"][:n]
    got = run_way(WORD_AND_HALVES, "halves", 2, 32, {"r": records.copy(), "n": n}, way)["r"].view(R_DTYPE)
    np.testing.assert_array_equal(got["w"], want["w"])
    np.testing.assert_array_equal(got["out"], want["out"])


UNION_COPY = "union U { float f; unsigned u; };\n__global__ void k(U* p, U* q) {\n  p[threadIdx.x] = q[threadIdx.x];\n}\n"


@pytest.mark.parametrize("way", WAYS)
def test_a_union_in_memory_copied_whole_keeps_its_bits(way: str) -> None:
    """Its members cover its bytes (one buffer of 32-bit elements): an element copied whole is its
    bytes, signalling NaNs and payloads included, through a float view as through an int one."""
    from c_support import run_way

    bits = np.array([0x7fa00001, 0xffc00123, 0x80000000, 0x3f800000, 0x7f800001, 1, 0xffffffff, 12345] * 4,
                    dtype=np.uint32)
    got = run_way(UNION_COPY, "k", 1, 32, {"p": np.zeros(32, np.float32), "q": bits.view(np.float32).copy()}, way)
    np.testing.assert_array_equal(got["p"].view(np.uint32), bits)


def test_unions_in_constant_and_device_memory_through_whole_programs(tmp_path) -> None:
    """``__constant__ FU c_fu[4]`` set with cudaMemcpyToSymbol and read through the other member;
    ``__device__ Item d_items[64]`` whose unions (of other sizes) are written through one member
    and read through another, then copied back with cudaMemcpyFromSymbol: the translated program
    and the emulated one print what NumPy's ``.view`` gives."""
    import pathlib
    import subprocess
    import sys

    from c_support import need_compiler

    need_compiler(cpp=True)
    h = ((np.arange(64) - 20).astype(np.float32) * np.float32(0.37)).astype(np.float32)
    fu = np.array([1.5, -0.0, 3.25e-5, -7.0], np.float32).view(np.uint32)
    hb = fu[np.arange(64) % 4]
    vu = h.view(np.uint32)
    w = (h.astype(np.float64) * 0.5).view(np.uint64)
    w0 = vu ^ (w >> np.uint64(32)).astype(np.uint32)
    w1 = (w >> np.uint64(20)) & np.uint64(0xFFFFFFFF)
    s = 0
    for i in range(64):
        s = (s * 31 + int(hb[i]) + 7 * int(w0[i]) + 13 * int(w1[i]) + i + int(vu[i]) + (int(w[i]) >> 7)) % (1 << 64)
    want = f"{s} {hb[1]} {w0[5]} {w1[5]}\n"
    source = pathlib.Path(__file__).resolve().parent / "programs" / "module_unions.cu"
    for mode in ((), ("--emulate",)):
        result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(source), *mode],
                                capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert result.returncode == 0, (mode, result.stderr)
        assert result.stdout == want, mode
