"""Typed views of local records and records of narrower members (issue 36 items 1 and 8,
docs/typed_views.md):

- a local record of scalars seen through a pointer to a type of its size (NVIDIA's
  NV12toBGRandResize: ``*(uint32_t*)&luma = *(uint32_t*)pSrc`` of a ``uchar4``), and a local
  scalar seen as a record of its bytes: each byte of the one is the same byte of the other,
  little-endian;
- a record of narrower members stored whole into memory of wider elements (the tensor-core
  GEMMs' ``*((int4*)doubles + lane) = *((int4*)src + lane)``): whole elements, bit for bit;
- array members of records in shared and global memory indexed at run time (Rodinia dwt2d's
  ``buffer.data[i]`` in a templated class held in shared memory), with exact isl accesses.

Each kernel is our own, checked bit for bit against NumPy (``.view``) through the emulator, the
LLVM JIT and the C backend on several launch shapes; what stays refused is a located error.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from polypy.errors import UserError
from polypy.poly import build_model
from test_typed_views import WAYS, _run, _same_bits, _special_floats

SHAPES = [(1, 32), (3, 32), (2, 64)]


def _special_doubles(n: int) -> np.ndarray:
    """Double bits worth keeping: NaN payloads (quiet and signaling), -0.0, infinities, denormals."""
    words = [0x7FF8000000000000, 0x7FF8000012345678, 0x7FF0000000000001, 0xFFF4000000000ABC,
             0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000, 0x0000000000000001,
             0x800FFFFFFFFFFFFF, 0x3FF0000000000000]
    rng = np.random.default_rng(11)
    words += [int(w) for w in rng.integers(0, 1 << 63, n - len(words), dtype=np.int64)]
    return np.array(words[:n], np.uint64).view(np.float64)


# --------------------------------------------------------------------------- local records

LOCAL = r"""
#include <stdint.h>
struct Mixed { unsigned short lo; unsigned char a, b; };   // four bytes, no padding

__global__ void local_record_views(const uint8_t* src, const float* f, const double* d, unsigned* out,
                                   float* fout, double* dout, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uchar4 px;
  *(uint32_t*)&px = *(const uint32_t*)(src + 4 * i);     // NV12toBGRandResize's idiom
  out[8 * i + 0] = px.x + 3u * px.y + 5u * px.z + 7u * px.w;
  px.y ^= 0x5a;
  out[8 * i + 1] = *(uint32_t*)&px;                      // the members composed again
  Mixed m;
  *(unsigned*)&m = out[8 * i + 1] * 2654435761u;         // a struct of mixed member sizes
  out[8 * i + 2] = m.lo * 3u + m.a * 5u + m.b;
  short2 s;
  *(int*)&s = (int)out[8 * i + 1];                       // signed members
  out[8 * i + 3] = (unsigned)(s.x * 7 + s.y);
  unsigned w = out[8 * i + 1];
  uchar4 c = *(uchar4*)&w;                               // a scalar seen as a record of its bytes
  c.z = 9;
  *(uchar4*)&w = c;
  out[8 * i + 4] = w + c.x;
  float g = f[i];
  ushort2 h = *(ushort2*)&g;                             // the halves of a float's bits
  out[8 * i + 5] = h.x ^ ((unsigned)h.y << 3);
  ((ushort2*)&g)->y ^= 0x8000;                           // its sign flipped through the upper half
  fout[2 * i] = g;
  float4 v4 = make_float4(f[i], -f[i], 1.0f, f[(i + 1) % n]);
  uint4 u4 = *(uint4*)&v4;                               // record to record, member for member
  out[8 * i + 6] = u4.x ^ u4.y ^ u4.w;
  int4 k4;
  *(double2*)&k4 = make_double2(d[i], d[(i + 1) % n]);  // two doubles written as four ints
  k4.y ^= 0x80000000;                                    // the first double's sign bit
  double2 dd = *(double2*)&k4;
  dout[2 * i] = dd.x;
  dout[2 * i + 1] = dd.y;
  (*(uint32_t*)&px)++;                                   // ++ through the view
  char4 back = *(char4*)(uint32_t*)&px;                  // a cast of the view back to a record
  out[8 * i + 7] = *(uint32_t*)&px;
  fout[2 * i + 1] = (float)(back.x + back.w);
}
"""


def _local_args(n: int) -> dict:
    rng = np.random.default_rng(5)
    return {"src": rng.integers(0, 256, 4 * n + 4, dtype=np.int64).astype(np.uint8), "f": _special_floats(n),
            "d": _special_doubles(n), "out": np.zeros(8 * n, np.uint32), "fout": np.zeros(2 * n, np.float32),
            "dout": np.zeros(2 * n, np.float64), "n": n}


def _local_reference(a: dict) -> dict:
    n = a["n"]
    u32 = np.uint32
    b = a["src"][: 4 * n].reshape(n, 4).astype(np.uint32)
    out = np.zeros((n, 8), np.uint32)
    out[:, 0] = b[:, 0] + 3 * b[:, 1] + 5 * b[:, 2] + 7 * b[:, 3]
    b[:, 1] ^= 0x5A
    word = b[:, 0] | b[:, 1] << 8 | b[:, 2] << 16 | b[:, 3] << 24
    out[:, 1] = word
    m = (word.astype(np.uint64) * 2654435761 % (1 << 32)).astype(u32)
    out[:, 2] = (m & 0xFFFF) * u32(3) + ((m >> 16) & 0xFF) * u32(5) + (m >> 24)
    s = word.view(np.int32)
    lo = (s & 0xFFFF).astype(np.uint16).view(np.int16).astype(np.int32)
    hi = (s >> 16).astype(np.int16).astype(np.int32)
    out[:, 3] = (lo * 7 + hi).astype(np.uint32)
    w = (word & ~u32(0xFF << 16)) | u32(9 << 16)
    out[:, 4] = w + (word & 0xFF)
    fb = a["f"].view(np.uint32)
    out[:, 5] = (fb & 0xFFFF) ^ ((fb >> 16) << 3)
    fout = np.zeros((n, 2), np.uint32)
    fout[:, 0] = fb ^ u32(0x80000000)
    neg = (-a["f"]).view(np.uint32)  # NumPy's negation flips the sign bit, as CUDA's does
    out[:, 6] = fb ^ neg ^ np.roll(fb, -1)
    db = a["d"].view(np.uint64)
    dout = np.stack([db ^ np.uint64(1 << 63), np.roll(db, -1)], axis=1)
    word = word + u32(1)
    out[:, 7] = word
    x = (word & 0xFF).astype(np.uint8).view(np.int8).astype(np.int32)
    wv = (word >> 24).astype(np.uint8).view(np.int8).astype(np.int32)
    fout[:, 1] = (x + wv).astype(np.float32).view(np.uint32)
    return {"out": out.reshape(-1), "fout": fout.reshape(-1).view(np.float32),
            "dout": dout.reshape(-1).view(np.float64)}


@pytest.mark.parametrize("shape", SHAPES[:2])
@pytest.mark.parametrize("way", WAYS)
def test_local_records_seen_through_a_type_of_their_size(tmp_path, way: str, shape) -> None:
    grid, block = shape
    n = grid * block - 5  # a partial last block
    args = _local_args(n)
    got = _run(tmp_path, LOCAL, "local_record_views", grid, block, args, way)
    for name, want in _local_reference(args).items():
        _same_bits(got[name], want, name)


# --------------------------------------------------------------------------- whole records into wider elements

WIDER = r"""
__global__ void narrow_records_into_wide_elements(const double* src, double* dst, double* pairs,
                                                   const uchar4* bytes, float* fdst, int off) {
  __shared__ double tile[2][64];
  int t = threadIdx.x, b = blockIdx.x;
  double* row = &tile[b & 1][0];
  for (int k = t; k < 32; k += blockDim.x)              // 16 bytes each: two doubles, bit for bit
    *((int4*)row + k) = *((const int4*)(src + 64 * b) + k);
  __syncthreads();
  for (int k = t; k < 64; k += blockDim.x)
    dst[64 * b + 63 - k] = row[k];
  for (int k = t; k < 32; k += blockDim.x)              // at a run-time offset (checked aligned)
    *((int4*)(dst + 64 * gridDim.x + off + 64 * b) + k) = *((const int4*)(src + 64 * b) + k);
  int i = b * blockDim.x + t;
  *((int2*)pairs + i) = *((const int2*)src + i);          // 8 bytes: one double
  *((uchar4*)fdst + i) = bytes[i];                        // four bytes: one float
}
"""


def _wider_args(grid: int, block: int, off: int) -> dict:
    rng = np.random.default_rng(13)
    n = grid * block
    src = _special_doubles(max(64 * grid, n))
    return {"src": src, "dst": np.zeros(128 * grid + off, np.float64), "pairs": np.zeros(n, np.float64),
            "bytes": rng.integers(0, 256, (n, 4), dtype=np.int64).astype(np.uint8),
            "fdst": np.zeros(n, np.float32), "off": off}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("way", WAYS)
def test_a_record_of_narrow_members_stores_whole_wider_elements(tmp_path, way: str, shape) -> None:
    grid, block = shape
    off = 6
    args = _wider_args(grid, block, off)
    got = _run(tmp_path, WIDER, "narrow_records_into_wide_elements", grid, block, args, way)
    src = args["src"].view(np.uint64)
    dst = np.zeros(128 * grid + off, np.uint64)
    for b in range(grid):
        dst[64 * b: 64 * b + 64] = src[64 * b: 64 * b + 64][::-1]
        dst[64 * grid + off + 64 * b: 64 * grid + off + 64 * b + 64] = src[64 * b: 64 * b + 64]
    _same_bits(got["dst"], dst.view(np.float64), "dst")
    n = grid * block
    _same_bits(got["pairs"], args["src"][:n], "pairs")
    _same_bits(got["fdst"], args["bytes"].reshape(-1).view(np.float32), "fdst")


def test_a_misaligned_run_time_offset_of_the_wide_store_faults(tmp_path) -> None:
    from polypy.errors import MisalignedAddressError

    args = _wider_args(1, 32, 5)  # 5 doubles: 40 bytes, not a multiple of 16
    with pytest.raises(MisalignedAddressError) as info:
        _run(tmp_path, WIDER, "narrow_records_into_wide_elements", 1, 32, args, "emulator")
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (13, 7)  # the cast


# --------------------------------------------------------------------------- array members of records

MEMBERS = r"""
template <typename T, int N>
class Buffer {
 public:
  T data[N];
  __device__ T& operator[](const int i) { return data[i]; }
  __device__ int column(int c) { return c / 2 + (c & 1) * (N / 2); }
  __device__ T at(int i) const { return data[i]; }
};

template <int N>
struct Stage {
  int count;
  Buffer<float, N> buffer;                 // an array member after a member of another type
  __device__ void run(const float* in, float* out, int shift) {
    int t = threadIdx.x;
    if (t == 0) count = 0;
    buffer[buffer.column(t)] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = buffer.data[buffer.column((t + shift) % blockDim.x)] * 2.0f + count;
  }
};

struct V { float d[4]; };
struct M { int n; float w[4]; };

__global__ void array_members(const float* in, float* out, V* v, M* m, float* out2, float* out3, int shift) {
  __shared__ Stage<64> stage;              // a templated class in shared memory
  stage.run(in, out, shift);
  __shared__ Buffer<float, 64> plain;      // an object of one member type: one buffer of floats
  plain[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x] + 1.0f;
  __syncthreads();
  out3[blockIdx.x * blockDim.x + threadIdx.x] = plain.at(blockDim.x - 1 - threadIdx.x);
  __shared__ V s[16];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  if (t < 16) for (int k = 0; k < 4; ++k) s[t].d[k] = 0.0f;
  __syncthreads();
  if (t < 64) s[t % 16].d[t / 16] = v[i].d[shift % 4];
  __syncthreads();
  out2[i] = s[(t + 1) % 16].d[(t + shift) % 4] + m[i].w[shift % 4] + v[i].d[(t + shift) % 4];
  m[i].w[(t + 1) % 4] = (float)m[i].n;
  struct { int k; float acc[4]; } loc;     // a local record with an array member
  for (int k = 0; k < 4; ++k) loc.acc[k] = (float)k;
  loc.acc[(t + shift) % 4] += 10.0f;
  v[i].d[shift % 4] = loc.acc[t % 4];
}
"""


M_RECORD = np.dtype([("n", np.int32), ("w", np.float32, 4)])


def _members_args(grid: int, block: int, shift: int) -> dict:
    rng = np.random.default_rng(17)
    n = grid * block
    m = np.zeros(n, M_RECORD)  # `struct M { int n; float w[4]; }` with the C layout
    m["n"] = np.arange(n)
    m["w"] = rng.standard_normal((n, 4))
    return {"in": rng.standard_normal(n).astype(np.float32), "out": np.zeros(n, np.float32),
            "v": rng.standard_normal(4 * n).astype(np.float32), "m": m,
            "out2": np.zeros(n, np.float32), "out3": np.zeros(n, np.float32), "shift": shift}


def _members_reference(a: dict, grid: int, block: int) -> dict:
    shift = a["shift"]
    n = grid * block
    out = np.zeros(n, np.float32)
    v = a["v"].reshape(n, 4).copy()
    m = a["m"].copy()
    out2 = np.zeros(n, np.float32)
    out3 = (a["in"].reshape(grid, block)[:, ::-1] + np.float32(1)).reshape(-1)
    for b in range(grid):
        data = np.zeros(64, np.float32)
        for t in range(block):
            data[t // 2 + (t & 1) * 32] = a["in"][b * block + t]
        for t in range(block):
            c = (t + shift) % block
            out[b * block + t] = data[c // 2 + (c & 1) * 32] * np.float32(2)
        s = np.zeros((16, 4), np.float32)
        for t in range(min(block, 64)):
            s[t % 16, t // 16] = v[b * block + t, shift % 4]
        for t in range(block):
            i = b * block + t
            out2[i] = s[(t + 1) % 16, (t + shift) % 4] + m["w"][i, shift % 4] + v[i, (t + shift) % 4]
    for i in range(n):
        t = i % block
        m["w"][i, (t + 1) % 4] = np.float32(i)
        acc = np.arange(4, dtype=np.float32)
        acc[(t + shift) % 4] += 10
        v[i, shift % 4] = acc[t % 4]
    return {"out": out, "out2": out2, "out3": out3, "v": v.reshape(-1), "m": m}


@pytest.mark.parametrize("shape", [(1, 32), (2, 64)])
@pytest.mark.parametrize("way", WAYS)
def test_array_members_of_records_indexed_at_run_time(tmp_path, way: str, shape) -> None:
    grid, block = shape
    args = _members_args(grid, block, 3)
    got = _run(tmp_path, MEMBERS, "array_members", grid, block, args, way)
    for name, want in _members_reference(args, grid, block).items():
        if name == "m":
            np.testing.assert_array_equal(got[name]["n"], want["n"])
            got, want = {name: got[name]["w"]}, want["w"]
        np.testing.assert_allclose(got[name], want, rtol=1e-6, err_msg=name)


def test_array_members_of_records_keep_isl_exact(tmp_path) -> None:
    path = tmp_path / "members.cu"
    path.write_text(MEMBERS)
    kernel = polypy.load(str(path)).kernel("array_members")
    model = build_model(kernel)
    shared = [a for a in model.accesses if a.space == "shared"]
    assert {a.buffer for a in shared} >= {"stage_f32", "stage_i32", "s", "plain"}
    # Every access to the array members is affine (exact) except the one read whose index the
    # program itself takes modulo `blockDim.x` (a parameter: not affine, in any memory).
    inexact = [a.text for a in shared if not a.index_exact]
    assert len(inexact) == 1 and "% blockDim.x" in inexact[0] and inexact[0].startswith("stage_f32["), inexact


# --------------------------------------------------------------------------- refused, located

REFUSED = [
    ("padded-record",
     "struct P { char a; int b; };\n__global__ void k(long long* y) {\n  P p;\n  p.a = 1; p.b = 2;\n"
     "  y[0] = *(long long*)&p;\n}\n",
     "reading a variable's bytes as another type", (5, 11)),
    ("another-size",
     "__global__ void k(unsigned* y) {\n  uchar4 a = make_uchar4(1, 2, 3, 4);\n  y[0] = *(unsigned short*)&a;\n}\n",
     "reading a variable's bytes as another type", (3, 11)),
    ("bool-member",
     "struct B { bool ok; unsigned char a, b, c; };\n__global__ void k(unsigned* y) {\n  B r;\n"
     "  r.ok = true; r.a = 1; r.b = 2; r.c = 3;\n  y[0] = *(unsigned*)&r;\n}\n",
     "reading a variable's bytes as another type", (5, 11)),
    ("partial-wide-element",
     "__global__ void k(double* d, const short2* s) {\n  *((short2*)d + threadIdx.x) = s[threadIdx.x];\n}\n",
     "writing a short into part of a double element", (2, 3)),
]


@pytest.mark.parametrize("name,source,message,where", REFUSED, ids=[c[0] for c in REFUSED])
def test_record_views_polypy_does_not_model_are_located_errors(tmp_path, name, source, message, where) -> None:
    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    with pytest.raises(UserError) as info:
        polypy.load(str(path))
    err = info.value
    assert message in err.message, err.message
    assert err.loc is not None and (err.loc.line, err.loc.col) == where, err.render()
