"""Frontend tests, one per construct: parse a small kernel, run it with the emulator, compare with NumPy.

Running the IR (rather than only looking at it) is what makes these tests able to fail for the
right reason: a construct is supported when the kernel computes what the C source says.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import polypy
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir.printer import print_kernel
from polypy.ir.queries import contains
from polypy.ir.visitor import walk


def load(tmp_path: pathlib.Path, source: str, name: str = "k.cu", **kw) -> n.Module:
    path = tmp_path / name
    path.write_text(source)
    return polypy.load(path, **kw)


def run(tmp_path, source, kernel, grid, block, args, *, shmem=0, name="k.cu", **kw):
    module = load(tmp_path, source, name, **kw)
    k = module.kernel(kernel)
    emulate(k, grid, block, args, shmem=shmem)
    return k


def test_saxpy_guard_and_scalar_forwarding(tmp_path):
    src = """
    __global__ void saxpy(int n, float a, const float* __restrict__ x, float* y) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] = a * x[i] + y[i];
    }"""
    x = np.arange(100, dtype=np.float32)
    y = np.ones(100, dtype=np.float32)
    k = run(tmp_path, src, "saxpy", 4, 32, [100, 2.0, x, y])
    np.testing.assert_allclose(y, 2 * np.arange(100) + 1)
    assert k.params[2].ptype.restrict and k.params[2].ptype.const
    # `int i = ...` is kept as a binding (a let: a name for its value, assigned nowhere), which
    # analyses look through; it is the only local, and no variable is left.
    decls = [x for x in walk(k) if isinstance(x, n.Decl)]
    assert [(d.name, d.let) for d in decls] == [("i", True)]
    assert any(isinstance(x, n.BlockIdx) for x in walk(decls[0].init))


def test_int_unsigned_long_double_bool_scalars(tmp_path):
    src = """
    __global__ void k(int i, unsigned u, long long l, double d, bool b, unsigned char c, double* out) {
      out[0] = i / 3;            // truncation toward zero
      out[1] = i % 3;            // sign of the dividend
      out[2] = u - 3u;           // unsigned wrap
      out[3] = l * 1000000007LL;
      out[4] = d * 0.5;
      out[5] = b ? 1.0 : -1.0;
      c += 250;                  // computed in int, stored back into unsigned char
      out[6] = c;
      out[7] = (float)(1.0 / 3.0);
    }"""
    out = np.zeros(8)
    run(tmp_path, src, "k", 1, 1, [-7, 1, 123456789, 3.0, True, 10, out])
    assert list(out[:7]) == [-2, -1, 2**32 - 2, 123456789 * 1000000007, 1.5, 1.0, (10 + 250) % 256]
    assert out[7] == float(np.float32(1 / 3))


def test_local_arrays_with_initializers_and_loops(tmp_path):
    src = """
    __global__ void k(float* out) {
      float w[5] = {1.0f, 2.0f, 3.0f};        // the rest is zero
      int m[2][3] = {{1, 2, 3}, {4, 5, 6}};
      float s = 0.0f;
      for (int j = 0; j < 5; ++j) s += w[j] * (j + 1);
      for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++)
          s += m[r][c];
      out[threadIdx.x] = s + threadIdx.x;
    }"""
    out = np.zeros(4, dtype=np.float32)
    run(tmp_path, src, "k", 1, 4, [out])
    np.testing.assert_allclose(out, 1 + 4 + 9 + 21 + np.arange(4))


def test_while_do_break_continue_comma(tmp_path):
    src = """
    __global__ void k(int* out, int n) {
      int t = threadIdx.x, acc = 0, j = 0;
      while (true) {
        j++;
        if (j % 2 == 0) continue;
        if (j > n + t) break;
        acc += j;
      }
      int d = 0;
      do { d += 3; } while (d < t);
      int a, b;
      for (a = 0, b = 10; a < b; a++, b--) acc += 1;
      out[t] = acc * 1000 + d;
    }"""
    out = np.zeros(6, dtype=np.int32)
    run(tmp_path, src, "k", 1, 6, [out, 5])
    for t in range(6):
        acc = sum(j for j in range(1, 5 + t + 1) if j % 2 == 1) + 5
        d = 3
        while d < t:
            d += 3
        assert out[t] == acc * 1000 + d


def test_increment_operators_in_expressions(tmp_path):
    src = """
    __global__ void k(int* out) {
      int i = 0;
      out[i++] = 10;     // post-increment: stores to out[0]
      out[++i] = 20;     // pre-increment: stores to out[2]
      int j = i--;       // j = 2, i = 1
      out[3] = j * 10 + i;
      int x = 5;
      x *= 3; x -= 1; x <<= 2; x >>= 1; x |= 1; x &= 0xff; x ^= 2; x %= 7;
      out[4] = x;
    }"""
    out = np.zeros(5, dtype=np.int32)
    run(tmp_path, src, "k", 1, 1, [out])
    x = 5
    x *= 3; x -= 1; x <<= 2; x >>= 1; x |= 1; x &= 0xff; x ^= 2; x %= 7
    assert list(out) == [10, 0, 20, 21, x]


def test_ternary_and_logical_short_circuit_guard_loads(tmp_path):
    src = """
    __global__ void k(const float* x, float* y, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      // Without short-circuit evaluation x[i] would be read out of bounds.
      float v = (i < n && x[i] > 0.0f) ? x[i] : -1.0f;
      if (i < 2 * n) y[i] = (i < n || x[0] > 0.0f) ? v : 7.0f;
    }"""
    x = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    y = np.zeros(6, dtype=np.float32)
    run(tmp_path, src, "k", 1, 8, [x, y, 3])
    np.testing.assert_allclose(y, [1, -1, 3, -1, -1, -1])


def test_side_effects_in_short_circuit_operands(tmp_path):
    src = """
    __device__ int bump(int* c) { c[0] += 1; return c[0]; }
    __global__ void k(int* c, int* out, int flag) {
      if (flag && bump(c) > 0) out[0] = 1;      // bump runs only when flag is set
      out[1] = flag ? bump(c) : -bump(c + 1);
    }"""
    for flag, expect_c, expect_out in ((0, [0, 1], [0, -1]), (1, [2, 0], [1, 2])):
        c = np.zeros(2, dtype=np.int32)
        out = np.zeros(2, dtype=np.int32)
        run(tmp_path, src, "k", 1, 1, [c, out, flag])
        assert list(c) == expect_c and list(out) == expect_out


def test_device_functions_inlined_with_early_returns_loops_and_references(tmp_path):
    src = """
    __device__ float clampf(float v, float lo, float hi) {
      if (v < lo) return lo;
      if (v > hi) return hi;
      return v;
    }
    __device__ int first_negative(const float* a, int n) {
      for (int j = 0; j < n; ++j)
        if (a[j] < 0.0f) return j;
      return -1;
    }
    __device__ void accumulate(float& acc, float v) { acc += v; }
    __device__ void write_pair(float* p, float a, float b) { p[0] = a; p[1] = b; }
    __global__ void k(const float* a, float* out, int n) {
      float acc = 0.0f;
      accumulate(acc, clampf(a[threadIdx.x], -1.0f, 1.0f));
      accumulate(acc, 10.0f * first_negative(a, n));
      write_pair(out + 2 * threadIdx.x, acc, (float)threadIdx.x);
    }"""
    a = np.array([0.5, 3.0, -4.0, 2.0], dtype=np.float32)
    out = np.zeros(8, dtype=np.float32)
    module = load(tmp_path, src)
    k = module.kernel("k")
    emulate(k, 1, 4, [a, out, 4])
    expect = [np.clip(v, -1, 1) + 20 for v in a]
    np.testing.assert_allclose(out[0::2], expect)
    np.testing.assert_allclose(out[1::2], np.arange(4))
    assert not contains(k.body, n.Return)


def test_struct_by_value_and_vector_types(tmp_path):
    src = """
    struct Params { float scale; int n; float2 shift; };
    __device__ float4 add4(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
    __global__ void k(Params p, const float4* in, float4* out) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i >= p.n) return;
      float4 v = in[i];
      float4 s = add4(v, make_float4(p.shift.x, p.shift.y, 0.0f, 0.0f));
      s.z *= p.scale;
      out[i] = s;
    }"""
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    out = np.zeros_like(x)
    module = load(tmp_path, src)
    k = module.kernel("k")
    assert [sp.name for sp in k.source_params] == ["p", "in", "out"]
    emulate(k, 2, 8, {"p": {"scale": 2.0, "n": 10, "shift": {"x": 1.0, "y": -1.0}}, "in": x, "out": out})
    expect = x.copy()
    expect[:, 0] += 1
    expect[:, 1] -= 1
    expect[:, 2] *= 2
    np.testing.assert_allclose(out, expect)


def test_pointer_arithmetic_and_mutable_pointers(tmp_path):
    src = """
    __global__ void k(const float* a, float* out, int cols) {
      const float* row = a + threadIdx.x * cols;   // a row pointer
      float* dst = &out[threadIdx.x];
      float s = 0.0f;
      for (const float* p = row; p < row + cols; ++p) s += *p;
      const float* q = row;
      q += cols - 1;
      *dst = s + q[0] * 100.0f;
    }"""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.zeros(3, dtype=np.float32)
    # `p < row + cols` compares two pointers into one array: their offsets.
    run(tmp_path, src, "k", 1, 3, [a, out, 4])
    np.testing.assert_allclose(out, a.sum(1) + a[:, -1] * 100)
    out[:] = 0
    src = src.replace("for (const float* p = row; p < row + cols; ++p) s += *p;",
                      "const float* p = row; for (int j = 0; j < cols; ++j) { s += *p; p++; }")
    run(tmp_path, src, "k", 1, 3, [a, out, 4])
    np.testing.assert_allclose(out, a.sum(1) + a[:, -1] * 100)

def test_a_pointer_minus_an_unsigned_moves_back(tmp_path):
    # `p - threadIdx.x` moves back by the value (C's pointer arithmetic), not by `-threadIdx.x`
    # negated as an unsigned (2**32 - tx forward); likewise `p -= u` and through a short.
    src = """
    __global__ void k(const float* in, float* out) {
      __shared__ float s[64];
      s[threadIdx.x] = in[threadIdx.x];
      __syncthreads();
      const float* p = s + 32 + threadIdx.x;
      p = p - threadIdx.x;                           // s + 32
      const float* q = s + 63 - threadIdx.x;
      const float* r = s + 63;
      r -= threadIdx.x;
      unsigned short h = (unsigned short)threadIdx.x;
      const float* w = in + 63 - h;
      out[threadIdx.x] = p[0] + 10.0f * q[0] + 100.0f * r[0] + 1000.0f * w[0];
    }"""
    x = np.arange(64, dtype=np.float32) * 2
    out = np.zeros(64, dtype=np.float32)
    run(tmp_path, src, "k", 1, 64, [x, out])
    back = x[63 - np.arange(64)]
    np.testing.assert_array_equal(out, x[32] + 10 * back + 100 * back + 1000 * back)
    jit = np.zeros(64, dtype=np.float32)
    polypy.compile(tmp_path / "k.cu").k[1, 64](x, jit)
    np.testing.assert_array_equal(jit, out)



def test_shared_memory_static_2d_scalar_and_dynamic(tmp_path):
    src = """
    __global__ void k(const float* in, float* out) {
      __shared__ float tile[4][8];
      __shared__ float total;
      extern __shared__ float dyn[];
      int tx = threadIdx.x, ty = threadIdx.y;
      tile[ty][tx] = in[ty * 8 + tx];
      dyn[ty * 8 + tx] = 2.0f * in[ty * 8 + tx];
      if (tx == 0 && ty == 0) total = 0.0f;
      __syncthreads();
      if (tx == 0 && ty == 0) {
        for (int r = 0; r < 4; ++r) for (int c = 0; c < 8; ++c) total += tile[r][c];
      }
      __syncthreads();
      out[ty * 8 + tx] = tile[tx % 4][ty] + dyn[(ty * 8 + tx + 1) % 32] + total;
    }"""
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, dtype=np.float32)
    run(tmp_path, src, "k", 1, (8, 4), [x, out], shmem=32 * 4)
    t = x.reshape(4, 8)
    expect = np.array([t[tx % 4, ty] + 2 * x[(ty * 8 + tx + 1) % 32] + x.sum() for ty in range(4) for tx in range(8)])
    np.testing.assert_allclose(out, expect)


def test_constant_memory_enum_constexpr_define_and_sizeof(tmp_path):
    src = """
    #define SCALE 3
    enum Mode { ADD = 1, MUL = 2 };
    constexpr int OFFSET = 4;
    static const float HALF = 0.5f;
    __constant__ float coef[3] = {1.0f, 2.0f, 4.0f};
    __global__ void k(float* out) {
      int i = threadIdx.x;
      out[i] = coef[i % 3] * SCALE + MUL + OFFSET + HALF + sizeof(double);
    }"""
    out = np.zeros(6, dtype=np.float32)
    run(tmp_path, src, "k", 1, 6, [out])
    np.testing.assert_allclose(out, np.array([1, 2, 4, 1, 2, 4]) * 3 + 2 + 4 + 0.5 + 8)


def test_device_global_written_by_kernel_and_atomics(tmp_path):
    src = """
    __device__ int counter;
    __device__ unsigned int hist[4];
    __global__ void k(const int* v, int* tickets) {
      int i = threadIdx.x;
      tickets[i] = atomicAdd(&counter, 1);
      atomicAdd(&hist[v[i] % 4], 1u);
      atomicMax(&counter, 0);
    }"""
    module = load(tmp_path, src)
    v = np.arange(16, dtype=np.int32)
    tickets = np.zeros(16, dtype=np.int32)
    counter = np.zeros(1, dtype=np.int32)
    hist = np.zeros(4, dtype=np.uint32)
    emulate(module.kernel("k"), 1, 16, [v, tickets], globals={"counter": counter, "hist": hist})
    assert sorted(tickets) == list(range(16))
    assert counter[0] == 16 and list(hist) == [4, 4, 4, 4]


def test_templates_instantiated_by_launch_and_explicitly(tmp_path):
    src = """
    template <typename T, int K> __device__ T times(T v) { return v * K; }
    template <int BLOCK, typename T>
    __global__ void scale(T* x, int n) {
      int i = blockIdx.x * BLOCK + threadIdx.x;
      if (i < n) x[i] = times<T, 3>(x[i]) + BLOCK;
    }
    template __global__ void scale<64, double>(double*, int);
    void host(float* d) { scale<32><<<2, 32>>>(d, 50); }
    template <typename T> struct Engine { T first(T* d) { return d[0]; } };
    template struct Engine<float>;  // a class's instantiation: host code, not a kernel's
    """
    module = load(tmp_path, src)
    names = {k.name for k in module.kernels}
    assert names == {"scale_64_double", "scale_32_float"}
    x = np.ones(50, dtype=np.float32)
    emulate(module.kernel("scale_32_float"), 2, 32, [x, 50])
    np.testing.assert_allclose(x, 3 + 32)
    d = np.ones(70)
    emulate(module.kernel("scale_64_double"), 2, 64, [d, 70])
    np.testing.assert_allclose(d, 3 + 64)


def test_a_kernel_template_launched_with_a_class_templates_parameter_names_the_instance(tmp_path):
    # A member of a class template, defined outside the class, instantiated explicitly: the
    # launch names the kernel instance of the class's argument, picked by a test on it.
    src = """
    template <typename T> __global__ void fill(T* x) { x[threadIdx.x] = T(1); }
    template <typename T> struct Engine { void run(T* d); };
    template <typename T> void Engine<T>::run(T* d) {
      fill<T><<<1, 32>>>(d);
    }
    template struct Engine<float>;
    """
    module = load(tmp_path, src)
    assert [k.name for k in module.kernels] == ["fill_float"]
    (site,) = [s for f in module.host.files.values() for s in f.launches]
    assert site.kernel == "fill_float" and site.when == "(__is_same(T, float))" and site.loc.line == 5
    x = np.zeros(32, dtype=np.float32)
    emulate(module.kernel("fill_float"), 1, 32, [x])
    np.testing.assert_array_equal(x, 1)


def test_math_functions_map_to_float_and_double_precision(tmp_path):
    src = """
    #include <cmath>
    __global__ void k(const float* x, float* f, double* d) {
      float v = x[threadIdx.x];
      f[threadIdx.x] = expf(v) + sqrt(v) + fabsf(-v) + rsqrtf(v) + fminf(v, 0.5f) + std::max(v, 1.0f) + powf(v, 2.0f);
      double w = v;
      d[threadIdx.x] = exp(w) + tanh(w) + erf(w) + fmax(w, 0.25) + floor(w * 3.0) + min(threadIdx.x, 2u);
      float s, c;
      sincosf(v, &s, &c);
      f[threadIdx.x + 4] = s * s + c * c;
    }"""
    x = np.array([0.25, 0.5, 1.0, 2.0], dtype=np.float32)
    f = np.zeros(8, dtype=np.float32)
    d = np.zeros(4)
    module = load(tmp_path, src)
    k = module.kernel("k")
    calls = {c.fn: c.type.name for c in _calls(k)}
    assert calls["exp"] in ("f32", "f64") and calls["tanh"] == "f64" and calls["rsqrt"] == "f32"
    emulate(k, 1, 4, [x, f, d])
    xd = x.astype(np.float64)
    np.testing.assert_allclose(f[:4], np.exp(x) + np.sqrt(x) + x + 1 / np.sqrt(x) + np.minimum(x, 0.5)
                               + np.maximum(x, 1) + x ** 2, rtol=1e-6)
    from math import erf
    np.testing.assert_allclose(d, np.exp(xd) + np.tanh(xd) + [erf(v) for v in xd] + np.maximum(xd, 0.25)
                               + np.floor(xd * 3) + np.minimum(np.arange(4), 2), rtol=1e-12)
    np.testing.assert_allclose(f[4:], 1.0, rtol=1e-6)


def _calls(k):
    from polypy.ir.visitor import walk
    return [x for x in walk(k) if isinstance(x, n.Call)]


def test_grid_and_block_in_three_dimensions(tmp_path):
    src = """
    __global__ void k(int* out, int nx, int ny, int nz) {
      int x = blockIdx.x * blockDim.x + threadIdx.x;
      int y = blockIdx.y * blockDim.y + threadIdx.y;
      int z = blockIdx.z * blockDim.z + threadIdx.z;
      if (x < nx && y < ny && z < nz) out[(z * ny + y) * nx + x] = x + 10 * y + 100 * z + 1000 * (gridDim.x * gridDim.y * gridDim.z);
    }"""
    out = np.zeros(5 * 6 * 7, dtype=np.int32)
    run(tmp_path, src, "k", (2, 2, 4), (4, 4, 2), [out, 5, 6, 7])
    z, y, x = np.meshgrid(np.arange(7), np.arange(6), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(out.reshape(7, 6, 5), x + 10 * y + 100 * z + 1000 * 16)


def test_warp_shuffles_and_votes(tmp_path):
    src = """
    __global__ void k(const float* x, float* out, unsigned* ballots) {
      float v = x[threadIdx.x];
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
      unsigned b = __ballot_sync(0xffffffff, x[threadIdx.x] > 0.0f);
      int lane = threadIdx.x % warpSize;
      if (lane == 0) { out[threadIdx.x / 32] = v; ballots[threadIdx.x / 32] = b; }
    }"""
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    out = np.zeros(2, dtype=np.float32)
    ballots = np.zeros(2, dtype=np.uint32)
    run(tmp_path, src, "k", 1, 64, [x, out, ballots])
    np.testing.assert_allclose(out, x.reshape(2, 32).sum(1), rtol=1e-5)
    for w in range(2):
        assert ballots[w] == sum(1 << lane for lane in range(32) if x[32 * w + lane] > 0)


def test_pragma_unroll_and_macros_with_arguments(tmp_path):
    src = """
    #define IDX(r, c, w) ((r) * (w) + (c))
    __global__ void k(float* out) {
      float s = 0.0f;
      #pragma unroll 4
      for (int j = 0; j < 8; ++j) s += j;
      out[IDX(threadIdx.y, threadIdx.x, 2)] = s;
    }"""
    out = np.zeros(4, dtype=np.float32)
    run(tmp_path, src, "k", 1, (2, 2), [out])
    np.testing.assert_allclose(out, 28)


def test_c_source_file_with_annotated_kernels(tmp_path):
    src = """
    __global__ void scale(float* x, int n, float a) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) x[i] = x[i] * a;
    }"""
    x = np.arange(10, dtype=np.float32)
    run(tmp_path, src, "scale", 1, 16, [x, 10, 2.5], name="k.c")
    np.testing.assert_allclose(x, np.arange(10) * 2.5)


def test_host_program_launch_sites_and_spans(tmp_path):
    src = """#include <cstdio>
#include <cuda_runtime.h>
__device__ float sq(float v) { return v * v; }
__global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = sq(x[i]); }
int main() {
  float* d;
  cudaMalloc(&d, 64 * sizeof(float));
  k<<<1, 64, 0>>>(d, 64);
  printf("done\\n");
  return 0;
}
"""
    module = load(tmp_path, src)
    host = module.host
    assert host is not None and host.has_main
    (f,) = [hf for hf in host.files.values() if hf.path.endswith("k.cu")]
    (launch,) = f.launches
    assert f.text[launch.start:launch.end] == "k<<<1, 64, 0>>>(d, 64)"
    assert (launch.grid, launch.block, launch.shmem, launch.stream, launch.args) == ("1", "64", "0", None, ("d", "64"))
    kinds = sorted(s.kind for s in f.device_spans)
    assert kinds == ["device", "kernel"]
    assert {i.kind for i in f.includes} == {"system", "cuda"}


def test_ir_dump_of_every_sample_prints_and_reparses():
    from polypy.ir.parser import parse_module
    from polypy.ir.printer import print_module
    from samples.spec import all_samples

    for s in all_samples():
        module = polypy.load(s.source, defines=s.defines)
        text = print_module(module)
        again = parse_module(text)
        assert print_module(again) == text, s.name


def test_bundled_headers_parse_without_system_compiler(tmp_path, monkeypatch):
    from frontend import clang_setup

    monkeypatch.setenv("POLYPY_HEADERS", "bundled")
    src = """#include <stdio.h>
#include <math.h>
#include <cstdlib>
#include <cuda_runtime.h>
__global__ void k(float* x) { x[threadIdx.x] = sqrtf(x[threadIdx.x]); }
int main() { float* d; cudaMalloc(&d, 16); k<<<1, 4>>>(d); printf("%f\\n", 1.0); return 0; }
"""
    module = load(tmp_path, src)
    assert [k.name for k in module.kernels] == ["k"]
    assert clang_setup.header_mode() == "bundled"
    x = np.array([1, 4, 9, 16], dtype=np.float32)
    emulate(module.kernel("k"), 1, 4, [x])
    np.testing.assert_allclose(x, [1, 2, 3, 4])


def test_printed_ir_shows_source_names(tmp_path):
    src = """
    __global__ void k(float* out, int n) {
      float acc = 0.0f;
      for (int step = 0; step < n; ++step) acc += step;
      out[0] = acc;
    }"""
    text = print_kernel(load(tmp_path, src).kernel("k"))
    assert "for step: i32 = 0 to n step 1" in text and "var acc: f32 = 0.0f" in text
