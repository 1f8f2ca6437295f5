"""Typed views of memory (issue 36 item 1, docs/typed_views.md): a buffer read and written
through a pointer to another element type of the same size (``((int*)x)[i]`` of a float buffer,
``(unsigned*)p``, ``reinterpret_cast<uint4*>(x)``) is the buffer's own elements through a bit
cast, never a value conversion; of another size (``(float*)bytes``, ``(unsigned char*)floats``,
a dynamic shared pool carved into typed arrays) it is the bytes covered; atomics through a view
act on the buffer's bits (the classic float atomicMax by ``atomicCAS``); local unions of one-size
scalars read members as one another's bits. Each kernel is our own, checked bit for bit against
NumPy's ``.view`` through the emulator, the LLVM JIT and the C backend; each view polypy does not
model is a located error.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import copy_args, run_c
from codegen.cuda import print_cuda_kernel
from polypy.emulator import emulate
from polypy.errors import UserError

WAYS = ["emulator", "llvm", "c"]


def _run(tmp_path, source: str, kernel: str, grid, block, args: dict, way: str, *, shmem: int = 0,
         check_races: bool = True) -> dict:
    src = tmp_path / f"{kernel}.cu"
    src.write_text(source)
    if way == "emulator":
        out = copy_args(args)
        emulate(polypy.load(str(src)).kernel(kernel), grid, block, out, shmem=shmem, check_races=check_races)
        return out
    if way == "c":
        module = polypy.load(str(src))
        return run_c(module.kernel(kernel), grid, block, args, shmem=shmem, globals_=module.globals)
    out = copy_args(args)
    launch = getattr(polypy.compile(str(src)), kernel)[grid, block]
    if shmem:
        launch = getattr(polypy.compile(str(src)), kernel)[grid, block, shmem]
    launch(*out.values())
    return out


def _special_floats(n: int) -> np.ndarray:
    """Float bits worth keeping: NaNs with payloads, a signaling NaN, -0.0, infinities, denormals."""
    words = [0x7FC00000, 0x7FC12345, 0x7F800001, 0xFFC00001, 0x80000000, 0x7F800000, 0xFF800000,
             0x00000001, 0x807FFFFF, 0x3F800000, 0xC0490FDB, 0x00000000]
    rng = np.random.default_rng(7)
    words += list(rng.integers(0, 1 << 32, n - len(words), dtype=np.uint64))
    return np.array(words[:n], np.uint64).astype(np.uint32).view(np.float32)


# --------------------------------------------------------------------------- global buffers

GLOBAL = r"""
__global__ void global_views(float* x, unsigned* bits, int* expo, double* d, long long* dbits,
                             int* xi_in, float* vec, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int* xi = (int*)x;
    bits[i] = ((unsigned*)x)[i];                                  // read through a view
    expo[i] = (int)((((const unsigned*)x)[i] >> 23) & 0xff) - 127;  // exponent field
    xi[i] = xi[i] ^ 0x80000000;                                    // sign flip in place
    dbits[i] = reinterpret_cast<long long*>(d)[i] & 0x7FF0000000000000LL;
    ((unsigned long long*)d)[i] ^= 1ULL << 63;                     // compound assignment
    unsigned* u = (unsigned*)xi_in;                                // int <-> unsigned: one width
    u[i] = u[i] >> 1;                                              // a logical shift of the bits
    ((int*)&x[0])[i]++;                                            // ++ through a view
  }
  if (i < n / 4) {
    uint4 q = reinterpret_cast<uint4*>(vec)[i];                    // a vector view of a float buffer
    q.x ^= 0x80000000u; q.w = q.y | 1u;
    reinterpret_cast<uint4*>(vec)[i] = q;
    int* p = (int*)(vec + 4 * i);                                  // a view at an offset
    p[2] = p[2] + 1;
  }
}
"""


def _global_args(n: int) -> dict:
    rng = np.random.default_rng(3)
    x = _special_floats(n)
    d = np.concatenate([[0.0, -0.0, np.inf, np.nan, 5e-324], rng.standard_normal(n - 5)]).astype(np.float64)
    return {"x": x, "bits": np.zeros(n, np.uint32), "expo": np.zeros(n, np.int32), "d": d,
            "dbits": np.zeros(n, np.int64), "xi_in": rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32),
            "vec": _special_floats(n)[::-1].copy(), "n": n}


def _global_reference(a: dict) -> dict:
    n = a["n"]
    xb = a["x"].view(np.uint32)
    want = {"bits": xb.copy(), "expo": ((xb >> 23) & 0xFF).astype(np.int32) - 127}
    want["x"] = ((xb ^ np.uint32(0x80000000)) + np.uint32(1)).view(np.float32)
    db = a["d"].view(np.int64)
    want["dbits"] = db & np.int64(0x7FF0000000000000)
    want["d"] = (a["d"].view(np.uint64) ^ np.uint64(1 << 63)).view(np.float64)
    want["xi_in"] = (a["xi_in"].view(np.uint32) >> 1).view(np.int32)
    v = a["vec"].view(np.uint32)[: 4 * (n // 4)].copy().reshape(-1, 4)
    v[:, 0] ^= np.uint32(0x80000000)
    v[:, 3] = v[:, 1] | np.uint32(1)
    v[:, 2] = v[:, 2] + np.uint32(1)
    vec = a["vec"].view(np.uint32).copy()
    vec[: 4 * (n // 4)] = v.reshape(-1)
    want["vec"] = vec.view(np.float32)
    return want


def _same_bits(got: np.ndarray, want: np.ndarray, name: str) -> None:
    kind = f"u{got.dtype.itemsize}"
    np.testing.assert_array_equal(got.view(kind), want.view(kind), err_msg=name)


@pytest.mark.parametrize("way", WAYS)
def test_global_views_are_bit_exact(tmp_path, way: str) -> None:
    args = _global_args(42)
    out = _run(tmp_path, GLOBAL, "global_views", 2, 32, args, way)
    for name, want in _global_reference(args).items():
        _same_bits(out[name], want, name)


# --------------------------------------------------------------------------- shared, local, constant

ON_CHIP = r"""
__constant__ float table[8] = {1.0f, -2.0f, 0.5f, -0.0f, 3.0f, 1e-40f, -7.25f, 100.0f};

__global__ void on_chip(const float* x, float* out, unsigned* cbits, int* lbits) {
  __shared__ float tile[64];
  int t = threadIdx.x;
  ((int*)tile)[t] = __float_as_int(x[t]) ^ (int)0x80000000;   // written through an int view
  __syncthreads();
  out[t] = tile[63 - t];
  cbits[t] = ((const unsigned*)table)[t % 8];
  float loc[4];
  for (int k = 0; k < 4; ++k) loc[k] = x[(t + k) % 64];
  unsigned* lu = (unsigned*)loc;
  lu[t % 4] |= 1u;
  int s = 0;
  for (int k = 0; k < 4; ++k) s ^= ((int*)loc)[k];
  lbits[t] = s;
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_shared_local_and_constant_views(tmp_path, way: str) -> None:
    x = _special_floats(64)
    args = {"x": x, "out": np.zeros(64, np.float32), "cbits": np.zeros(64, np.uint32), "lbits": np.zeros(64, np.int32)}
    out = _run(tmp_path, ON_CHIP, "on_chip", 1, 64, args, way)
    xb = x.view(np.uint32)
    _same_bits(out["out"], (xb ^ np.uint32(0x80000000))[::-1], "out")
    table = np.array([1.0, -2.0, 0.5, -0.0, 3.0, 1e-40, -7.25, 100.0], np.float32).view(np.uint32)
    _same_bits(out["cbits"], table[np.arange(64) % 8], "cbits")
    want = np.zeros(64, np.uint32)
    for t in range(64):
        loc = np.array([xb[(t + k) % 64] for k in range(4)], np.uint32)
        loc[t % 4] |= 1
        want[t] = np.bitwise_xor.reduce(loc)
    _same_bits(out["lbits"], want.view(np.int32), "lbits")


# --------------------------------------------------------------------------- atomics through views

ATOMICS = r"""
__device__ float atomicMaxFloat(float* addr, float val) {
  int* a = (int*)addr;
  int old = *a, assumed;
  do {
    assumed = old;
    old = atomicCAS(a, assumed, __float_as_int(fmaxf(val, __int_as_float(assumed))));
  } while (assumed != old);
  return __int_as_float(old);
}

__device__ double atomicAddDouble(double* addr, double val) {
  unsigned long long* a = (unsigned long long*)addr;
  unsigned long long old = *a, assumed;
  do {
    assumed = old;
    old = atomicCAS(a, assumed, __double_as_longlong(val + __longlong_as_double(assumed)));
  } while (assumed != old);
  return __longlong_as_double(old);
}

__global__ void view_atomics(const float* x, float* m, double* sum, float* slots, int* counts, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicMaxFloat(m, x[i]);
    atomicAddDouble(sum, (double)i);
    atomicExch((int*)&slots[i % 4], __float_as_int(x[i]) & 0x7fffffff);
    atomicAdd((unsigned*)&counts[i % 3], 2u);
  }
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_atomics_through_views(tmp_path, way: str) -> None:
    n = 100
    rng = np.random.default_rng(5)
    x = rng.standard_normal(n).astype(np.float32)
    x[17] = 7.5
    args = {"x": x, "m": np.array([-np.inf], np.float32), "sum": np.zeros(1, np.float64),
            "slots": np.zeros(4, np.float32), "counts": np.array([-3, 0, 5], np.int32), "n": n}
    # The idiom's first plain read of the address races with other blocks' CAS (the loop makes it
    # right): the emulator's race check would report it.
    out = _run(tmp_path, ATOMICS, "view_atomics", 4, 32, args, way, check_races=False)
    assert out["m"][0] == np.float32(7.5)
    assert out["sum"][0] == n * (n - 1) / 2
    # Each slot holds |x| of one of the elements that hit it (which one depends on the order).
    for s in range(4):
        assert out["slots"][s] in np.abs(x[s::4]), s
    np.testing.assert_array_equal(out["counts"], np.array([-3 + 2 * 34, 2 * 33, 5 + 2 * 33], np.int32))


SIGNED = r"""
__global__ void unsigned_atomics(int* g, unsigned* olds) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  olds[t] = atomicInc((unsigned int*)&g[0], 17);   // the unsigned operations on int memory
  atomicDec((unsigned int*)&g[1], 137);
  atomicMax((unsigned int*)&g[2], (unsigned)t);
  atomicMin((unsigned*)&g[3], 5u);
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_atomics_whose_answer_depends_on_the_signedness(tmp_path, way: str) -> None:
    """Done as a CAS loop computing with the view's (unsigned) meaning: -1 is the largest."""
    g = np.array([3, 0, -1, -7], np.int32)
    out = _run(tmp_path, SIGNED, "unsigned_atomics", 2, 32, {"g": g, "olds": np.zeros(64, np.uint32)}, way)
    # atomicInc with limit 17 from 3, 64 times: 3..17 then 0..17 ... ; the olds are a permutation.
    seq = [3]
    for _ in range(64):
        seq.append(0 if seq[-1] >= 17 else seq[-1] + 1)
    assert out["g"][0] == seq[-1]
    np.testing.assert_array_equal(np.sort(out["olds"]), np.sort(np.array(seq[:-1], np.uint32)))
    dec = 0
    for _ in range(64):
        dec = 137 if dec == 0 or dec > 137 else dec - 1
    assert out["g"][1] == dec
    assert out["g"][2] == -1 and out["g"][3] == 5  # unsigned max keeps 0xffffffff; min of 0xfffffff9 and 5


def test_cas_on_a_float_buffer_compares_bits(tmp_path) -> None:
    """The CAS of the IR compares bits (as CUDA's atomicCAS): a NaN matches its own bits, and
    -0.0 does not match 0.0, in every backend."""
    source = r"""
__global__ void cas_bits(float* x, int* old) {
  int t = threadIdx.x;
  int* xi = (int*)x;
  old[t] = atomicCAS(&xi[t], t == 2 ? 0 : xi[t], 0x3f800000);
}
"""
    x = np.array([np.nan, -0.0, -0.0, 2.0], np.float32)
    x[0] = np.uint32(0x7FC12345).view(np.float32)
    for way in WAYS:
        out = _run(tmp_path, source, "cas_bits", 1, 4, {"x": x, "old": np.zeros(4, np.int32)}, way)
        _same_bits(out["old"], x.view(np.int32), way)
        want = np.array([1.0, 1.0, -0.0, 1.0], np.float32)  # slot 2 compared 0.0 with -0.0: no swap
        _same_bits(out["x"], want, way)


def test_cuda_printer_spells_a_float_cas_on_integers(tmp_path) -> None:
    src = tmp_path / "cas.cu"
    src.write_text(ATOMICS)
    text = print_cuda_kernel(polypy.load(str(src)).kernel("view_atomics"))
    assert "__int_as_float(atomicCAS((int*)&m[0], __float_as_int(" in text
    assert "atomicCAS((unsigned long long*)&sum[0], (unsigned long long)__double_as_longlong(" in text


# --------------------------------------------------------------------------- views of another size

BYTES = r"""
__global__ void byte_views(unsigned char* src, float* out, unsigned char* dst, const float* f, unsigned* fb,
                           short* sh, int* wide, const double* d, int* dparts, const int* iv, short* halves,
                           float* pairs, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float* s = (const float*)src;                      // dwt2d: floats from a byte buffer
    out[i] = s[i];
    ((float*)dst)[i] = f[i] * 2.0f;                          // a float written as four bytes
    const unsigned char* fbytes = (const unsigned char*)f;   // the bytes of a float buffer
    fb[i] = fbytes[4 * i + 1] | (fbytes[4 * i + 3] << 8);
    ((int*)sh)[i] = ((const int*)src)[i] + 1;                // ints into a buffer of shorts
    wide[i] = ((const short*)iv)[2 * i + 1];                 // the high half of each int
    int2 q = reinterpret_cast<const int2*>(d)[i];            // the two words of a double
    dparts[2 * i] = q.y;
    dparts[2 * i + 1] = q.x;
    halves[i] = ((const short*)d)[4 * i + 3];                // its top 16 bits, sign included
    float2 p = ((const float2*)(src + 8 * (i / 2)))[0];      // a vector view at a byte offset
    pairs[i] = (i % 2) ? p.y : p.x;
  }
}
"""


def _bytes_args(n: int) -> dict:
    rng = np.random.default_rng(11)
    src = rng.integers(0, 256, 4 * n + 8, dtype=np.uint64).astype(np.uint8)
    src[:8] = np.frombuffer(np.array([np.nan, -0.0], np.float32).tobytes(), np.uint8)
    d = np.concatenate([[-0.0, np.inf, -2.5], rng.standard_normal(n - 3)]).astype(np.float64)
    return {"src": src, "out": np.zeros(n, np.float32), "dst": np.zeros(4 * n, np.uint8), "f": _special_floats(n),
            "fb": np.zeros(n, np.uint32), "sh": np.zeros(2 * n, np.int16), "wide": np.zeros(n, np.int32), "d": d,
            "dparts": np.zeros(2 * n, np.int32), "iv": rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32),
            "halves": np.zeros(n, np.int16), "pairs": np.zeros(n, np.float32), "n": n}


def _bytes_reference(a: dict) -> dict:
    n = a["n"]
    src, f = a["src"], a["f"]
    fbytes = f.view(np.uint8).reshape(-1, 4).astype(np.uint32)
    with np.errstate(invalid="ignore"):
        twice = f * np.float32(2)
    want = {"out": src[: 4 * n].view(np.float32), "dst": twice.view(np.uint8),
            "fb": fbytes[:, 1] | (fbytes[:, 3] << 8),
            "sh": (src[: 4 * n].view(np.int32) + np.int32(1)).view(np.int16),
            "wide": a["iv"].view(np.int16)[1::2].astype(np.int32)}
    words = a["d"].view(np.int32).reshape(-1, 2)
    want["dparts"] = words[:, ::-1].reshape(-1).copy()
    want["halves"] = a["d"].view(np.int16)[3::4].copy()
    i = np.arange(n)
    want["pairs"] = src.view(np.float32)[2 * (i // 2) + i % 2]
    return want


@pytest.mark.parametrize("way", WAYS)
def test_views_of_another_size_are_the_bytes(tmp_path, way: str) -> None:
    args = _bytes_args(37)
    out = _run(tmp_path, BYTES, "byte_views", 2, 32, args, way)
    for name, want in _bytes_reference(args).items():
        _same_bits(out[name], want, name)


HISTOGRAM = r"""
#define BINS 64
#define T 64
__global__ void byte_histogram(const unsigned* data, unsigned* hist, int n) {
  __shared__ unsigned char counts[BINS * T];           // one byte counter per bin and thread
  int t = threadIdx.x;
  for (int k = 0; k < BINS / 4; ++k)
    ((unsigned*)counts)[t + k * T] = 0;                // cleared four bytes at a time
  __syncthreads();
  unsigned char* mine = counts + t;
  for (int pos = t; pos < n; pos += T) {
    unsigned v = data[pos];
    mine[T * ((v >> 2) & 0x3F)] += 1;
    mine[T * ((v >> 10) & 0x3F)] += 1;
  }
  __syncthreads();
  if (t < BINS) {
    unsigned sum = 0;
    for (int k = 0; k < T; ++k) sum += counts[T * t + k];
    hist[t] = sum;
  }
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_shared_byte_counters_cleared_as_words(tmp_path, way: str) -> None:
    rng = np.random.default_rng(2)
    n = 1500
    data = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    args = {"data": data, "hist": np.zeros(64, np.uint32), "n": n}
    out = _run(tmp_path, HISTOGRAM, "byte_histogram", 1, 64, args, way)
    want = np.bincount((data >> 2) & 0x3F, minlength=64) + np.bincount((data >> 10) & 0x3F, minlength=64)
    np.testing.assert_array_equal(out["hist"], want.astype(np.uint32))


POOL = r"""
__global__ void pool_views(const float* x, const int* k, const double* d, float* out, int n) {
  extern __shared__ unsigned char pool[];
  int t = threadIdx.x;
  int bd = blockDim.x;
  double* dd = (double*)pool;                                  // carved: doubles first,
  float* a = (float*)&dd[bd];                                  // then floats,
  int* b = (int*)&a[bd];                                       // then ints,
  unsigned char* c = &pool[bd * (sizeof(double) + 2 * sizeof(float))];  // then bytes
  int g = blockIdx.x * bd + t;
  dd[t] = g < n ? d[g] : 0.0;
  a[t] = g < n ? x[g] : 0.0f;
  b[t] = g < n ? k[g] : 0;
  c[t] = (unsigned char)t;
  __syncthreads();
  int o = (t + 1) % bd;
  if (g < n) out[g] = (float)dd[o] + a[o] * (float)b[o] + (float)c[bd - 1 - t];
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_a_dynamic_shared_pool_carved_into_typed_arrays(tmp_path, way: str) -> None:
    rng = np.random.default_rng(4)
    n, bd = 90, 32
    x = rng.standard_normal(n).astype(np.float32)
    k = rng.integers(-50, 50, n).astype(np.int32)
    d = rng.standard_normal(n)
    args = {"x": x, "k": k, "d": d, "out": np.zeros(n, np.float32), "n": n}
    out = _run(tmp_path, POOL, "pool_views", 3, bd, args, way, shmem=bd * 17)
    want = np.zeros(n, np.float32)
    for g in range(n):
        b, t = divmod(g, bd)
        o = b * bd + (t + 1) % bd
        dv, xv, kv = (d[o], x[o], k[o]) if o < n else (0.0, 0.0, 0)
        want[g] = np.float32(dv) + np.float32(xv) * np.float32(kv) + np.float32(bd - 1 - t)
    np.testing.assert_array_equal(out["out"], want)


# --------------------------------------------------------------------------- unions, pointer difference

UNIONS = r"""
union Bits { float f; unsigned u; int i; };
union Wide { double d; long long l; unsigned long long u; };

__device__ int exponent(float v) {
  Bits b;
  b.f = v;
  return (int)((b.u >> 23) & 0xff) - 127;
}

__global__ void unions(const float* x, unsigned* out, float* back, int* expo, const double* d, long long* dl,
                       long long* gaps) {
  int i = threadIdx.x;
  Bits b;
  b.f = x[i];
  out[i] = b.u;                      // a member read as another: the bits
  b.i ^= (int)0x80000000;            // written through one member, read through the other
  back[i] = b.f;
  expo[i] = exponent(x[i]);
  Wide w;
  w.d = d[i];
  w.u &= ~(1ULL << 63);
  dl[i] = w.l;
  const float* p = x + 3 * i;        // pointer difference, in elements of the pointee
  const float4* v = (const float4*)x;
  gaps[2 * i] = p - &x[i];
  gaps[2 * i + 1] = &v[i + 2] - v;
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_unions_of_one_size_and_pointer_difference(tmp_path, way: str) -> None:
    x = _special_floats(32)
    d = np.concatenate([[-0.0, -np.inf, np.nan], np.random.default_rng(1).standard_normal(29)])
    args = {"x": x, "out": np.zeros(32, np.uint32), "back": np.zeros(32, np.float32), "expo": np.zeros(32, np.int32),
            "d": d, "dl": np.zeros(32, np.int64), "gaps": np.zeros(64, np.int64)}
    out = _run(tmp_path, UNIONS, "unions", 1, 32, args, way)
    xb = x.view(np.uint32)
    _same_bits(out["out"], xb, "out")
    _same_bits(out["back"], (xb ^ np.uint32(0x80000000)).view(np.float32), "back")
    np.testing.assert_array_equal(out["expo"], ((xb >> 23) & 0xFF).astype(np.int32) - 127)
    np.testing.assert_array_equal(out["dl"], (d.view(np.uint64) & np.uint64((1 << 63) - 1)).view(np.int64))
    i = np.arange(32)
    np.testing.assert_array_equal(out["gaps"][0::2], 2 * i)
    np.testing.assert_array_equal(out["gaps"][1::2], i + 2)


# A union of a scalar and a struct of narrower scalars that cover its bytes (dct8x8's PackedShorts,
# whose struct is __align__(8): padding after the shorts): the members are slices of the bytes,
# little-endian as on the GPU.
SLICES = r"""
union Packed { struct __align__(8) { short lo; short hi; }; unsigned int word; };
union Mixed { struct { unsigned char b0, b1; short s; } parts; float f; };
union Wide { struct { unsigned lo; int hi; } w; double d; unsigned long long u; };
__global__ void slices(const unsigned* in, int* out, float* fout, const double* d, long long* dout, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  Packed p;
  p.word = in[t];
  out[4 * t] = p.lo;
  out[4 * t + 1] = p.hi;
  p.hi = (short)(p.lo * 3 + 1);
  out[4 * t + 2] = (int)p.word;
  Mixed m;
  m.f = (float)t * 0.75f - 3.0f;
  m.parts.b1 += 1;
  out[4 * t + 3] = m.parts.s + m.parts.b0;
  fout[t] = m.f;
  Wide w;
  w.d = d[t];
  dout[2 * t] = w.w.hi;
  w.w.lo ^= 0xffffu;
  dout[2 * t + 1] = (long long)w.u;
}
"""


def _slices_reference(words: np.ndarray, d: np.ndarray, n: int) -> dict:
    out = np.zeros((n, 4), np.int32)
    fout = np.zeros(n, np.float32)
    dout = np.zeros((n, 2), np.int64)
    for t in range(n):
        w = int(words[t])
        lo, hi = np.array([w], np.uint32).view(np.int16)
        out[t, 0], out[t, 1] = lo, hi
        new_hi = np.int16(np.int32(lo) * 3 + 1)  # the int result converted to short (modulo)
        out[t, 2] = np.array([lo, new_hi], np.int16).view(np.int32)[0]
        m = np.array([np.float32(t) * np.float32(0.75) - np.float32(3.0)], np.float32).view(np.uint8).copy()
        m[1] = (int(m[1]) + 1) & 0xFF
        out[t, 3] = int(m[2:4].view(np.int16)[0]) + int(m[0])
        fout[t] = m.view(np.float32)[0]
        u = int(np.array([d[t]]).view(np.uint64)[0])
        dout[t, 0] = np.array([u >> 32], np.uint64).astype(np.uint32).view(np.int32)[0]
        dout[t, 1] = np.array([u ^ 0xFFFF], np.uint64).view(np.int64)[0]
    return {"out": out.ravel(), "fout": fout, "dout": dout.ravel()}


@pytest.mark.parametrize("shape", [(1, 32), (3, 40)])
@pytest.mark.parametrize("way", WAYS)
def test_unions_of_a_scalar_and_a_struct_of_its_bytes(tmp_path, way: str, shape: tuple[int, int]) -> None:
    grid, block = shape
    n = grid * block - 3
    rng = np.random.default_rng(block)
    words = rng.integers(0, 1 << 32, grid * block, dtype=np.uint64).astype(np.uint32)
    words[:4] = [0xFFFF8000, 0x00007FFF, 0x80000001, 0]
    d = np.concatenate([[-0.0, np.nan, -np.inf], rng.standard_normal(grid * block - 3) * 1e5])
    args = {"in": words, "out": np.zeros(4 * grid * block, np.int32), "fout": np.zeros(grid * block, np.float32),
            "d": d, "dout": np.zeros(2 * grid * block, np.int64), "n": np.int32(n)}
    out = _run(tmp_path, SLICES, "slices", grid, block, args, way)
    want = _slices_reference(words, d, n)
    np.testing.assert_array_equal(out["out"][:4 * n], want["out"])
    _same_bits(out["fout"][:n], want["fout"], "fout")
    np.testing.assert_array_equal(out["dout"][:2 * n], want["dout"])


# --------------------------------------------------------------------------- refused, located

REFUSED = [
    ("narrow-write",
     "__global__ void k(float* x) {\n  ((unsigned char*)x)[1] = 3;\n}\n",
     "writing a unsigned char into part of a float element", (2, 3)),
    ("bool-view",
     "__global__ void k(bool* x, int* y) {\n  y[0] = ((unsigned char*)x)[1];\n}\n",
     "views of bool memory are not supported", (2, 11)),
    ("atomic-bytes",
     "__global__ void k(unsigned char* x) {\n  atomicAdd((unsigned*)x, 1u);\n}\n",
     "atomics through a pointer that views unsigned char memory as unsigned int", (2, 3)),
    # a view at an offset checked at run time needs a type whose alignment is its size
    # (tests/test_aligned_views.py); float3's is 4
    ("unaligned-offset",
     "__global__ void k(unsigned char* x, float* y, int off) {\n  float3 v = *(float3*)&x[off];\n  y[0] = v.x;\n}\n",
     "cannot tell that the offset is a multiple of 12 bytes", (2, 15)),
    ("union-bit-field",  # its bits would be the whole word's (a wrong answer before)
     "union U { unsigned a : 3; int i; };\n__global__ void k(int* y) {\n  U u;\n  u.i = 13;\n  y[0] = u.a;\n}\n",
     "has a bit-field member 'a': bit-fields are not supported", (3, 5)),
    ("union-bool",
     "union U { float f; bool b; };\n__global__ void k(float* y) {\n  __shared__ U s[4];\n  s[0].f = 1.0f;\n"
     "  y[0] = s[0].b;\n}\n",
     "unions with bool members are not supported", (3, 16)),
    ("union-module-initializer",  # (unions in module memory: test_unions.py; an initializer sets the first member)
     "union U { float f; unsigned u; };\n__device__ U g[4] = {{1.0f}};\n__global__ void k(unsigned* y) {\n"
     "  y[0] = g[1].u;\n}\n",
     "holds a union: an initializer of a __device__ or __constant__ variable holding a union is not supported",
     (2, 14)),
    # (a local union whose members cover its bytes is copied whole: test_void_params.py's local records)
    ("union-copy",
     "union U { float f; int i; };\n__global__ void k(int* y) {\n  U u, w;\n  u.f = 1.0f;\n  w = u;\n"
     "  y[0] = w.i;\n}\n",
     "a union ('U') used as a whole value is not supported", (5, 7)),
    ("union-by-value",
     "union U { float f; unsigned u; };\n__global__ void k(U v, unsigned* y) {\n  y[0] = v.u;\n}\n",
     "unions are not supported in device code", (2, 21)),
    ("union-extern-shared",
     "union U { float f; unsigned u; };\n__global__ void k(unsigned* y) {\n  extern __shared__ U s[];\n"
     "  y[0] = s[0].u;\n}\n",
     "extern __shared__ arrays of records of mixed member types are not supported", (3, 23)),
    # (a union in memory whose members cover its bytes is copied whole: test_unions.py)
    ("union-in-memory",
     # (`union { float f; int i; }` in memory is the same bytes: test_void_params.py)
     "union U { bool b; char c; };\n__global__ void k(U* p, int* y) {\n  y[0] = p[0].c;\n}\n",
     "union 'U' in device memory has a bool in member 'b'", (2, 22)),
    ("alignment-test",
     "#include <stdint.h>\n__global__ void k(float* x, int* y) {\n  y[0] = ((uintptr_t)x & 15) == 0;\n}\n",
     "pointer-to-number conversions are not supported", (3, 11)),
    ("pointer-through-shuffle",
     "__global__ void k(float* x, float* y) {\n  unsigned long long a = (unsigned long long)x;\n"
     "  a = __shfl_sync(0xffffffffu, a, 0);\n  y[0] = 1.0f;\n}\n",
     "pointer-to-number conversions are not supported", (2, 26)),
    ("pointer-difference-buffers",
     "__global__ void k(float* x, float* z, long long* y) {\n  y[0] = x - z;\n}\n",
     "the difference of pointers into different buffers", (2, 10)),
    ("atomic-add-float-bits",
     "__global__ void k(float* x) {\n  atomicAdd((int*)x, 1);\n}\n",
     "this atomic operation through a pointer that views float memory as int", (2, 3)),
    ("atomic-max-float-bits",
     "__global__ void k(float* x) {\n  atomicMax((int*)x, 1);\n}\n",
     "this atomic operation through a pointer that views float memory as int", (2, 3)),
]


@pytest.mark.parametrize("name,source,message,where", REFUSED, ids=[c[0] for c in REFUSED])
def test_views_polypy_does_not_model_are_located_errors(tmp_path, name, source, message, where) -> None:
    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    with pytest.raises(UserError) as info:
        polypy.load(str(path))
    err = info.value
    assert message in err.message, err.message
    assert err.loc is not None and (err.loc.line, err.loc.col) == where, err.render()


RECORDS = r"""
struct V { int a, b; __device__ V() : a(), b() {} __device__ void reset() { a = 7; b = -1; } };
__global__ void record_views(float* x) {
  V* v = (V*)x;                         // records of ints over a float buffer
  v[threadIdx.x] = V();                 // value-initialized members through the view
  v[threadIdx.x + 4].reset();           // a member function on an object in the viewed memory
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_records_constructed_in_viewed_memory(tmp_path, way: str) -> None:
    x = np.full(16, 3.5, np.float32)
    out = _run(tmp_path, RECORDS, "record_views", 1, 4, {"x": x}, way)
    want = np.array([0] * 8 + [7, -1] * 4, np.int32)
    np.testing.assert_array_equal(out["x"].view(np.int32), want)


GRAD = r"""
__global__ void scale(float* x, float* y, const unsigned char* mask, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * ((const float*)mask)[i];
}
__global__ void absbits(float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ((int*)y)[i] = ((int*)x)[i] & 0x7fffffff;
}
"""


def test_grad_through_views(tmp_path, capsys) -> None:
    """A float read from a byte buffer is an inactive factor: d_x = d_y * m. The bits of an active
    value written back as a float through a view are refused where written (no derivative rule
    for the integer ``&``), never a silent zero."""
    from polypy.driver.cli import main

    src = tmp_path / "grad.cu"
    src.write_text(GRAD)
    n = 50
    rng = np.random.default_rng(9)
    m = rng.standard_normal(n).astype(np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    seed = rng.standard_normal(n).astype(np.float32)
    grad = polypy.grad(polypy.compile(str(src)).scale, wrt=["x", "y"])
    d_x, d_y, y = np.zeros(n, np.float32), seed.copy(), np.zeros(n, np.float32)
    grad[2, 32](x, d_x, y, d_y, m.view(np.uint8), n)
    np.testing.assert_array_equal(y, x * m)
    np.testing.assert_allclose(d_x, seed * m, rtol=1e-6)
    assert main(["grad", str(src), "--kernel", "absbits", "-o", str(tmp_path / "g.cu")]) == 1
    err = capsys.readouterr().err
    assert f"{src}:8:" in err and "cannot differentiate the bit cast" in err
    assert not (tmp_path / "g.cu").exists()


EXTERNS = r"""
template <typename T> __device__ T* pool() { extern __shared__ int raw[]; return (T*)raw; }

__global__ void extern_views(const float* x, double* out, int n) {
  extern __shared__ float fs[];
  extern __shared__ unsigned us[];                 // the same pool seen as unsigned
  extern __shared__ double ds[];                   // and as doubles
  int t = threadIdx.x;
  fs[t] = x[t];
  us[t] ^= 0x80000000u;                            // flips the sign of fs[t]
  __syncthreads();
  double d = ds[t / 2];                            // two floats' bytes as one double
  float* again = pool<float>();
  out[t] = d + (double)again[t];
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_extern_shared_arrays_of_different_types_are_one_pool(tmp_path, way: str) -> None:
    x = np.linspace(-3, 5, 64).astype(np.float32)
    args = {"x": x, "out": np.zeros(64, np.float64), "n": 64}
    out = _run(tmp_path, EXTERNS, "extern_views", 1, 64, args, way, shmem=64 * 4)
    flipped = -x
    want = flipped.view(np.float64)[np.arange(64) // 2] + flipped.astype(np.float64)
    _same_bits(out["out"], want, "out")


MEMCPY = r"""
#include <cstring>
__global__ void copies(const float* x, int* y, unsigned char* bytes, float* back) {
  int t[4];
  memcpy(t, (const int*)x + 4 * threadIdx.x, 16);         // the bits of four floats, as ints
  for (int j = 0; j < 4; j++) y[4 * threadIdx.x + j] = t[j];
  float f[2];
  memcpy(f, (const float*)bytes + 2 * threadIdx.x, 8);    // a wide view of bytes
  memcpy((int*)back + 2 * threadIdx.x, (const int*)f, 8); // into a view, from a view of a local
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_memcpy_through_views_copies_the_bits(tmp_path, way: str) -> None:
    n = 8
    x = _special_floats(4 * n)
    raw = _special_floats(2 * n)[::-1].copy()
    args = {"x": x, "y": np.zeros(4 * n, np.int32), "bytes": raw.view(np.uint8).copy(),
            "back": np.zeros(2 * n, np.float32)}
    out = _run(tmp_path, MEMCPY, "copies", 1, n, args, way)
    _same_bits(out["y"], x.view(np.int32), "y")
    _same_bits(out["back"], raw, "back")
