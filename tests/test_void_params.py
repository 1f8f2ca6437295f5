"""``void*`` kernel parameters cast to typed pointers inside the kernel (issue 36; Rodinia's
mummergpu: ``mummergpuKernel(void* match_coords, ...)`` and ``(_MatchCoord*)match_coords + q``).
The parameter is a buffer of one of the types the kernel casts it to, every cast a typed view of
it (frontend/lower/untyped.py, docs/typed_views.md): the same bytes, bit for bit. Each kernel is
our own, checked against NumPy's ``.view`` of the bytes through the emulator, the LLVM JIT and the
C backend on several launch shapes; a whole program through the C++ output and the emulator;
what polypy does not model is a located error.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from c_support import WAYS, need_compiler, run_way

SHAPES = [(1, 32), (3, 64), (2, 48)]

VIEWS = r"""
__global__ void views(void* out, const void* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* x = (const float*)in;
  unsigned int b = ((const unsigned int*)in)[i];     // the same bytes as bits
  int2* o = (int2*)out;
  o[i] = make_int2(b ^ 0x80000000u, (int)(b >> 23));
  if (x[i] == x[i] && x[i] > 1.0f) o[i].y = -1;      // a read as float
}
"""

RECORDS = r"""
struct Coord { int node; int len; };     // one scalar type (mummergpu's _MatchCoord, without its union)
struct Rec { int node; float w; };       // mixed member types

__global__ void records(void* coords, void* recs, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Coord* c = (Coord*)coords + i;         // mummergpu's MATCH_BASE
  c->len = c->node * 3;
  Rec* r = (Rec*)recs;
  r[i].w = r[i].w * 2.0f + (float)r[i].node;
}
"""

MIXED = r"""
__global__ void mixed(void* buf, double* sums, unsigned char* second, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  sums[i] = ((const double*)buf)[i];                   // 8 bytes: a wide view of the byte buffer
  second[i] = ((const unsigned char*)buf)[8 * i + 1];  // the smallest type: the buffer's elements
  ((float*)buf)[2 * i] = 1.5f * i;                     // a float stored as its 4 bytes
}
"""

PASSED = r"""
__device__ void put(void* p, int i, float v) { ((float*)p)[i] = v; }

__global__ void passed(void* dst, const void* src, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const void* s = src;                                 // no cast of a parameter itself: bytes
  put(dst, i, ((const float*)s)[n - 1 - i] + 1.0f);
}
"""


def _specials(n: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal(n).astype(np.float32) * 4
    special = np.array([0x7FC00001, 0x7F800001, 0x80000000, 0x7F800000, 0x00000001], np.uint32).view(np.float32)
    x[: min(n, 5)] = special[: min(n, 5)]  # NaN payload, signaling NaN, -0.0, inf, a denormal
    return x


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES)
def test_void_parameters_viewed_as_floats_bits_and_int2(way: str, grid: int, block: int) -> None:
    n = grid * block - 5
    x = _specials(n, np.random.default_rng(grid))
    # Any array's bytes: `in` given as uint32, `out` as float64 (one int2 each).
    args = {"out": np.zeros(n, np.float64), "in": x.view(np.uint32).copy(), "n": n}
    out = run_way(VIEWS, "views", grid, block, args, way)
    bits = x.view(np.uint32)
    with np.errstate(invalid="ignore"):
        second = np.where(x > 1.0, -1, (bits >> 23).astype(np.int32))
    want = np.stack([(bits ^ 0x80000000).view(np.int32), second], axis=1).reshape(-1)
    np.testing.assert_array_equal(out["out"].view(np.int32), want)
    np.testing.assert_array_equal(out["in"], bits)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES)
def test_void_parameters_viewed_as_records(way: str, grid: int, block: int) -> None:
    n = grid * block - 5
    rng = np.random.default_rng(7 + grid)
    coords = np.zeros(2 * n, np.int32)
    coords[0::2] = rng.integers(-1000, 1000, n)
    recs = np.zeros(n, np.dtype([("node", np.int32), ("w", np.float32)]))
    recs["node"] = rng.integers(-50, 50, n)
    recs["w"] = rng.standard_normal(n).astype(np.float32)
    args = {"coords": coords.view(np.uint8).copy(), "recs": recs.view(np.uint8).copy(), "n": n}
    out = run_way(RECORDS, "records", grid, block, args, way)
    want_coords = coords.copy()
    want_coords[1::2] = coords[0::2] * 3
    want_recs = recs.copy()
    want_recs["w"] = recs["w"] * np.float32(2) + recs["node"].astype(np.float32)
    np.testing.assert_array_equal(out["coords"].view(np.int32), want_coords)
    np.testing.assert_array_equal(out["recs"].view(recs.dtype)["node"], want_recs["node"])
    np.testing.assert_array_equal(out["recs"].view(recs.dtype)["w"].view(np.uint32), want_recs["w"].view(np.uint32))


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES)
def test_void_parameter_viewed_with_several_sizes(way: str, grid: int, block: int) -> None:
    n = grid * block - 5
    d = np.random.default_rng(3).standard_normal(n)
    d[:3] = [-0.0, np.inf, np.array(0x7FF0000000000001, np.uint64).view(np.float64)]  # a signaling NaN
    args = {"buf": d.copy(), "sums": np.zeros(n), "second": np.zeros(n, np.uint8), "n": n}
    out = run_way(MIXED, "mixed", grid, block, args, way)
    np.testing.assert_array_equal(out["sums"].view(np.uint64), d.view(np.uint64))
    np.testing.assert_array_equal(out["second"], d.view(np.uint8)[1::8])
    want = d.copy().view(np.float32)
    want[0::2] = np.float32(1.5) * np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(out["buf"].view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES[:2])
def test_void_parameter_only_passed_on_is_bytes(way: str, grid: int, block: int) -> None:
    n = grid * block - 5
    x = _specials(n, np.random.default_rng(5))
    args = {"dst": np.zeros(n, np.float32), "src": x.copy(), "n": n}
    out = run_way(PASSED, "passed", grid, block, args, way)
    with np.errstate(invalid="ignore"):
        want = x[::-1] + np.float32(1)
    np.testing.assert_array_equal(out["dst"].view(np.uint32), want.view(np.uint32))


OVERLAY = r"""
struct __align__(8) MC { union { int2 data; struct { int node; int len; }; }; };   // mummergpu's _MatchCoord

__global__ void overlay(void* mc, MC* typed, int n) {
  __shared__ MC s[64];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  if (i >= n) return;
  MC* r = (MC*)mc + i;
  int a = r->node, b = r->len;
  r->data = make_int2(b + 1, a * 2);      // one member written, the other read: the same elements
  r->len += r->data.x;
  s[t].data = typed[i].data;
  typed[i].node = s[t].len + s[t].data.x;
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES[:2])
def test_unions_whose_members_are_the_same_elements_in_memory(way: str, grid: int, block: int) -> None:
    n = grid * block - 5
    rng = np.random.default_rng(11 + grid)
    mc = rng.integers(-1000, 1000, 2 * n).astype(np.int32)
    typed = rng.integers(-1000, 1000, 2 * n).astype(np.int32)
    out = run_way(OVERLAY, "overlay", grid, block, {"mc": mc.view(np.int64).copy(), "typed": typed.copy(), "n": n},
                  way)
    want = mc.copy()
    want[0::2] = mc[1::2] + 1
    want[1::2] = mc[0::2] * 2 + mc[1::2] + 1
    want_typed = typed.copy()
    want_typed[0::2] = typed[0::2] + typed[1::2]
    np.testing.assert_array_equal(out["mc"].view(np.int32), want)
    np.testing.assert_array_equal(out["typed"], want_typed)


MIXED_OVERLAY = r"""
struct TA { union { unsigned int data; struct { unsigned short x; unsigned short y; }; }; };   // mummergpu's
struct MC { union { int2 data; struct { TA node; int len; }; }; };                             // MatchCoord
union FI { float f; int i; };

__global__ void mixed_overlay(MC* mc, FI* fi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  MC* r = mc + i;
  int a = r->node.x + 3 * r->node.y;     // halves of a word another member holds whole
  r->node.y = r->len & 0xffff;
  r->len = a + r->data.x;
  fi[i].i = fi[i].i ^ 0x80000000;         // the bits of a float
  fi[i].f = fi[i].f * 2.0f;
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES[:2])
def test_unions_of_several_types_in_memory(way: str, grid: int, block: int) -> None:
    n = grid * block - 5
    rng = np.random.default_rng(17 + grid)
    words = rng.integers(-2**31, 2**31, 2 * n).astype(np.int32)
    x = _specials(n, rng)
    out = run_way(MIXED_OVERLAY, "mixed_overlay", grid, block,
                  {"mc": words.view(np.uint16).copy(), "fi": x.copy(), "n": n}, way)
    halves = words.view(np.uint16).reshape(n, 4).astype(np.int64)
    a = halves[:, 0] + 3 * halves[:, 1]
    want = words.copy().reshape(n, 2)
    w0 = (halves[:, 0] | ((words.reshape(n, 2)[:, 1].astype(np.int64) & 0xffff) << 16)).astype(np.uint32)
    want[:, 0] = w0.view(np.int32)
    want[:, 1] = (a + want[:, 0]).astype(np.int32)
    np.testing.assert_array_equal(out["mc"].view(np.int32), want.reshape(-1))
    flipped = (x.view(np.uint32) ^ 0x80000000).view(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        np.testing.assert_array_equal(out["fi"].view(np.uint32), (flipped * np.float32(2)).view(np.uint32))


LOCAL_OVERLAY = r"""
struct PC {                                     // mummergpu's _PixelOfChildren
  union {
    uint4 data;
    union {
      struct { uchar3 a; uchar3 c; uchar3 g; uchar3 t; uchar3 d; char leafchar; };
      struct { uchar3 leafid; unsigned char pad[12]; char leafchar0; };
    };
  };
};
__device__ unsigned int address(uchar3 v) { return v.x | (v.y << 8) | (v.z << 16); }

__global__ void local_overlay(const uint4* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  PC p;
  p.data = in[i];                               // 16 bytes written as four words
  uchar3 next = (i & 1) ? p.c : p.t;            // read as bytes
  out[5 * i] = address(next) + p.leafchar;
  out[5 * i + 1] = p.pad[4] + p.leafchar0 * 1000;
  p.g.y = 7;                                    // one byte written
  p.leafid.x = 9;
  PC q;
  q = p;                                        // a whole copy
  out[5 * i + 2] = q.data.y;                    // words read back
  out[5 * i + 3] = q.data.x;
  PC r = q;                                     // a copy in the declaration
  out[5 * i + 4] = r.data.w;
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES[:2])
def test_local_records_holding_unions_of_several_sizes(way: str, grid: int, block: int) -> None:
    n = grid * block - 5
    words = np.random.default_rng(13 + grid).integers(0, 2**32, 4 * n, dtype=np.uint64).astype(np.uint32)
    out = run_way(LOCAL_OVERLAY, "local_overlay", grid, block, {"in": words, "out": np.zeros(5 * n, np.int32),
                                                                 "n": n}, way)
    b = words.view(np.uint8).reshape(n, 16).astype(np.int64)
    signed15 = words.view(np.int8).reshape(n, 16)[:, 15].astype(np.int64)
    i = np.arange(n)
    at = np.where(i & 1, 3, 9)                   # .c at byte 3, .t at byte 9
    nxt = b[i, at] | b[i, at + 1] << 8 | b[i, at + 2] << 16
    changed = b.copy()
    changed[:, 7] = 7
    changed[:, 0] = 9
    as_words = changed.astype(np.uint8).view(np.int32).reshape(n, 4)
    want = np.stack([nxt + signed15, b[:, 7] + signed15 * 1000, as_words[:, 1], as_words[:, 0], as_words[:, 3]],
                    axis=1).astype(np.int32).reshape(-1)
    np.testing.assert_array_equal(out["out"], want)


PROGRAM = r"""
#include <cstdio>
struct Coord { int node; int len; };
__global__ void fill(void* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    Coord* c = (Coord*)out + i;
    c->node = i;
    c->len = -2 * i;
    ((float*)out)[2 * n + i] = 0.5f * i;
  }
}
int main() {
  void* d;
  cudaMalloc(&d, 8 * sizeof(Coord) + 8 * sizeof(float));
  fill<<<2, 4>>>(d, 8);
  Coord h[8];
  float f[8];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  cudaMemcpy(f, (char*)d + sizeof h, sizeof f, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 8; ++i) printf("%d %d %g\n", h[i].node, h[i].len, f[i]);
  cudaFree(d);
  return 0;
}
"""


def _cli(tmp_path: pathlib.Path, source: str, *args: str) -> subprocess.CompletedProcess:
    src = tmp_path / "untyped.cu"
    src.write_text(source)
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args, str(src)], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["compiled", "emulated"])
def test_void_parameter_in_a_whole_program(tmp_path: pathlib.Path, mode: tuple[str, ...]) -> None:
    need_compiler(cpp=True)
    r = _cli(tmp_path, PROGRAM, "run", *mode)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == "".join(f"{i} {-2 * i} {0.5 * i:g}\n" for i in range(8))


REFUSED = {
    "atomic through a byte buffer": (
        "atomicAdd((int*)p, 1); o[0] = ((unsigned char*)p)[3];", "untyped.cu:3:3:",
        "atomics through a pointer that views unsigned char memory as int (another size) are not supported"),
    "two record types": (
        "struct A { int a; float b; }; struct B { float a; int b; };\n"
        "  o[0] = ((A*)p)->b + ((B*)p)->a;", "untyped.cu:4:24:",
        "pointer casts to or from records of mixed member types are not supported"),
    "a union with a bool in memory": (
        "union U { bool b; char c; };\n  o[t] = ((U*)p)[t].c;", "untyped.cu:4:11:",
        "union 'U' in device memory has a bool in member 'b'"),
    "a union record initialized by a list": (
        "struct M { union { int2 d; struct { int a, b; }; }; };\n  M m = {}; o[t] = m.a;", "untyped.cu:4:5:",
        "initializing 'm' of type 'M' (it holds a union) with a list is not supported in device code"),
    # (a local record whose union leaves bytes uncovered is a byte pool: test_unions.py)
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_void_parameter_refusals_are_located(tmp_path: pathlib.Path, case: str) -> None:
    body, where, message = REFUSED[case]
    r = _cli(tmp_path, "__global__ void k(void* p, float* o) {\n  int t = threadIdx.x;\n  " + body + "\n}\n",
             "translate", "-o", str(tmp_path / "out.c"))
    assert r.returncode == 1, r.stdout
    assert f"{where} error: {message}" in r.stderr and "^" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out.c").exists()
