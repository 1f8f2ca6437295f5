"""Device-code constructs real CUDA programs use (issue 14): ``switch``, the ``k<< <g, b>> >``
spelling, launches inside host function templates, a counter reused around a uniform
``__syncthreads`` loop (Rodinia srad_v1), vector views of buffers and cache hints, integer
intrinsics, ``size_t`` loops, 1-D texture references.

Kernels run through the emulator and the LLVM backend against NumPy; the whole program
``tests/programs/device_constructs.cu`` goes through the C++ backend and ``polypy run --emulate``;
what is still refused is refused with a located message.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import assert_load_refused, need_compiler, run_emulator_and_llvm
from codegen.c import find_compiler
from test_programs import outputs_match

PROGRAM = pathlib.Path(__file__).resolve().parent / "programs" / "device_constructs.cu"

KERNELS = r"""
__device__ int classify(int v) {
  switch (v % 7) {
    case 0: return 100;
    case 1: case 2: return 200 + v;
    default: break;
  }
  return -1;
}

__global__ void sw(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = x[i];
  int acc = 0;
  switch (v & 7) {
    case 0: acc = 10; break;
    case 1: case 2: { acc += 1; }
    default: acc *= 3; acc += 5; break;
    case 4 ... 5: acc = 7;
    case 6: if (v > 50) break; acc += 2;
  }
  switch (v) { case 3: acc += 1000; }
  for (int j = 0; j < 3; j++) {
    switch (j) { case 1: continue; case 2: acc += j; break; default: acc -= 1; }
  }
  y[i] = acc + classify(v);
}

enum Kind { KA = 1, KB = 5, KC = -2 };
__global__ void sw2(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = x[i], acc = 0;
  for (int j = 0; j < 4; j++) {
    switch ((v + j) % 4) {
      default: acc += 1;
      case 1: if (v > 40) continue; acc += 10;
      case 2: acc += 100; break;
      case 3:
        switch (v & 1) { case 0: acc += 1000; break; case 1: acc += 2000; }
        acc += 5;
    }
    acc *= 2;
  }
  Kind kd = (v % 3 == 0) ? KA : (v % 3 == 1 ? KB : KC);
  switch (kd) { case KA: acc += 7; break; case KC: acc -= 7; break; case KB: break; }
  char ch = (char)('a' + v % 4);
  switch (ch) { case 'a': case 'c': acc ^= 0x55; break; }
  y[i] = acc;
}

#define NT 64
__global__ void reduce(float* sums, int n) {
  __shared__ float ps[NT];
  int tx = threadIdx.x, bx = blockIdx.x;
  int i;
  int ei = bx * NT + tx;
  ps[tx] = ei < n ? sums[ei] : 0.0f;
  __syncthreads();
  for (i = 2; i <= NT; i = 2 * i) {
    if ((tx + 1) % i == 0) ps[tx] = ps[tx] + ps[tx - i / 2];
    __syncthreads();
  }
  if (tx == NT - 1) {
    for (i = bx * NT; i < bx * NT + 3; i++) ps[tx] += 0.0f * sums[i];
    sums[bx * NT] = ps[tx];
  }
}

__global__ void bits(const int* a, const int* b, const long long* w, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = a[i], y = b[i];
  out[10 * i + 0] = __popc((unsigned)x);
  out[10 * i + 1] = __clz(x);
  out[10 * i + 2] = __ffs(x);
  out[10 * i + 3] = __mul24(x, y);
  out[10 * i + 4] = (int)__umul24((unsigned)x, (unsigned)y);
  out[10 * i + 5] = __mulhi(x, y);
  out[10 * i + 6] = (int)__umulhi((unsigned)x, (unsigned)y);
  out[10 * i + 7] = __popcll((unsigned long long)w[i]);
  out[10 * i + 8] = __clzll(w[i]);
  out[10 * i + 9] = __ffsll(w[i]);
}

__global__ void vec(const float* x, float* y, const int* ix, int* iy, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n4) return;
  float4 a = reinterpret_cast<const float4*>(x)[i];
  float4 b = __ldg(reinterpret_cast<const float4*>(x + 4 * n4) + i);
  reinterpret_cast<float4*>(y)[i] = make_float4(a.x + b.w, a.y * 2.0f, a.z - b.x, a.w);
  int4 u = __ldcs(reinterpret_cast<const int4*>(ix) + i);
  __stcs(reinterpret_cast<int4*>(iy) + i, make_int4(u.w, u.z, u.y, u.x));
  float2* y2 = reinterpret_cast<float2*>(y + 4 * n4);
  y2[2 * i] = make_float2(b.x, b.y);
  y2[2 * i + 1] = make_float2(b.z + 1.0f, b.w);
  const float* back = reinterpret_cast<const float*>(reinterpret_cast<const float4*>(x) + n4);
  y[8 * n4 + i] = back[4 * i + 3];
}

__global__ void axpy(size_t n, float a, const float* x, float* y) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
    y[i] = a * x[i] + y[i];
}

__global__ void rowsum(size_t rows, size_t cols, const float* m, float* out) {
  size_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0.0f;
  for (size_t j = 0; j < cols; j++) s += m[r * cols + j] * m[r * cols + j];
  out[r] = s;
}

__global__ void down(const float* x, float* y, size_t n) {
  size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (t >= 4) return;
  for (size_t i = n; i > 0; i--) y[t * n + i - 1] = x[t * n + n - i] * 2.0f;
}

texture<float, 1, cudaReadModeElementType> t_a;
texture<float4, 1> t_v;
__device__ float twice(int i) { return 2.0f * tex1Dfetch(t_a, i); }
__global__ void tex(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 v = tex1Dfetch(t_v, i);
  out[i] = tex1Dfetch(t_a, i) + twice(n - 1 - i) + v.y * v.w;
}
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("device_constructs") / "kernels.cu"
    path.write_text(KERNELS)
    return path


@pytest.fixture(scope="module")
def compiled(source):
    return polypy.compile(str(source))


@pytest.fixture(scope="module")
def loaded(source):
    return polypy.load(str(source))


def run_both(loaded, compiled, name: str, grid, block, args: dict) -> list[dict]:
    """``args`` copied and run by the emulator and by the LLVM backend: both results."""
    return run_emulator_and_llvm(loaded, compiled, name, grid, block, args)


# ---------------------------------------------------------------------------- references
def _switch_ref(x: np.ndarray) -> np.ndarray:
    out = []
    for v in x.tolist():
        m, acc = v & 7, 0
        if m == 0:
            acc = 10
        elif m in (1, 2):
            acc = (acc + 1) * 3 + 5
        elif m in (4, 5):
            acc = 7 if v > 50 else 9
        elif m == 6:
            acc = 0 if v > 50 else 2
        else:
            acc = acc * 3 + 5
        acc += 1000 if v == 3 else 0
        acc += -1 + 2  # j = 0: default, j = 1: continue, j = 2: += 2
        c = v % 7
        out.append(acc + (100 if c == 0 else 200 + v if c in (1, 2) else -1))
    return np.array(out, np.int32)


def _bits_ref(a, b, w) -> np.ndarray:
    def s24(v: int) -> int:
        v &= 0xFFFFFF
        return v - (1 << 24) if v & 0x800000 else v

    def wrap32(v: int) -> int:
        v &= 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v

    rows = []
    for x, y, z in zip(a.tolist(), b.tolist(), w.tolist()):
        ux, uy, uz = x & 0xFFFFFFFF, y & 0xFFFFFFFF, z & (2 ** 64 - 1)
        rows.append([bin(ux).count("1"), 32 - ux.bit_length(), (ux & -ux).bit_length(),
                     wrap32(s24(x) * s24(y)), wrap32((ux & 0xFFFFFF) * (uy & 0xFFFFFF)),
                     wrap32((x * y) >> 32), wrap32((ux * uy) >> 32),
                     bin(uz).count("1"), 64 - uz.bit_length(), (uz & -uz).bit_length()])
    return np.array(rows, np.int64).astype(np.int32).ravel()


# ---------------------------------------------------------------------------- kernels
def test_switch_with_fallthrough_ranges_default_and_returns(loaded, compiled) -> None:
    x = np.random.default_rng(0).integers(0, 100, size=300).astype(np.int32)
    x[:8] = [0, 1, 2, 3, 4, 5, 6, 7]
    for got in run_both(loaded, compiled, "sw", 3, 128, {"x": x, "y": np.zeros_like(x), "n": 300}):
        np.testing.assert_array_equal(got["y"], _switch_ref(x))


def _switch2_ref(v: int) -> int:
    acc = 0
    for j in range(4):
        m, skip = (v + j) % 4, False
        if m == 0:  # default first, falling into case 1
            acc, m = acc + 1, 1
        if m == 1:
            if v > 40:
                skip = True  # continue: no `acc *= 2` this time
            else:
                acc, m = acc + 10, 2
        if skip:
            continue
        if m == 2:
            acc += 100
        elif m == 3:
            acc += (1000 if v % 2 == 0 else 2000) + 5
        acc *= 2
    acc += {0: 7, 1: 0, 2: -7}[v % 3]
    return acc ^ 0x55 if v % 4 in (0, 2) else acc


def test_nested_switches_default_first_continue_enums_and_chars(loaded, compiled) -> None:
    x = np.arange(90, dtype=np.int32)
    expected = np.array([_switch2_ref(v) for v in range(90)], np.int32)
    for got in run_both(loaded, compiled, "sw2", 1, 96, {"x": x, "y": np.zeros_like(x), "n": 90}):
        np.testing.assert_array_equal(got["y"], expected)


def test_switch_without_fallthrough_is_an_if_chain(tmp_path) -> None:
    path = tmp_path / "chain.cu"
    path.write_text("__global__ void k(int* x) {\n"
                    "  switch (x[threadIdx.x]) { case 0: x[threadIdx.x] = 5; break; default: x[threadIdx.x] = 6; }\n"
                    "}\n")
    text = polypy.load(str(path)).kernel("k")
    from polypy.ir.printer import print_kernel

    ir = print_kernel(text)
    assert "fall" not in ir and "done" not in ir  # no flags: if (v == 0) { ... } else { ... }
    assert ir.count("if (") == 1


def test_reused_counter_keeps_the_barrier_loop_uniform(loaded, compiled) -> None:
    """Rodinia srad_v1's reduce: `i` of a barrier loop reused by a loop only one thread runs."""
    x = np.random.default_rng(1).random(300).astype(np.float32)
    expected = np.array([x[b * 64:(b + 1) * 64].sum() for b in range(5)], np.float32)
    for got in run_both(loaded, compiled, "reduce", 5, 64, {"sums": x, "n": 300}):
        np.testing.assert_allclose(got["sums"][::64], expected, rtol=1e-5)


def test_integer_intrinsics_are_exact(loaded, compiled) -> None:
    rng = np.random.default_rng(3)
    n = 200
    a = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64)
    b = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64)
    w = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    a[:4] = [0, -1, 1, 2 ** 31 - 1]
    b[4:8] = [0, -1, 5, -(2 ** 23)]
    w[:4] = [0, -1, 1, 1 << 40]
    args = {"a": a.astype(np.int32), "b": b.astype(np.int32), "w": w, "out": np.zeros(10 * n, np.int32), "n": n}
    for got in run_both(loaded, compiled, "bits", 2, 128, args):
        np.testing.assert_array_equal(got["out"], _bits_ref(a, b, w))


def test_vector_views_cache_hints_and_offsets(loaded, compiled) -> None:
    rng = np.random.default_rng(5)
    n4 = 50
    x = rng.random(8 * n4).astype(np.float32)
    ix = rng.integers(0, 100, 4 * n4).astype(np.int32)
    a, b = x[:4 * n4].reshape(n4, 4), x[4 * n4:].reshape(n4, 4)
    y = np.concatenate([np.stack([a[:, 0] + b[:, 3], a[:, 1] * 2, a[:, 2] - b[:, 0], a[:, 3]], 1).ravel(),
                        np.stack([b[:, 0], b[:, 1], b[:, 2] + 1, b[:, 3]], 1).ravel(), b[:, 3]])
    args = {"x": x, "y": np.zeros(9 * n4, np.float32), "ix": ix, "iy": np.zeros(4 * n4, np.int32), "n4": n4}
    for got in run_both(loaded, compiled, "vec", 2, 32, args):
        np.testing.assert_allclose(got["y"], y, rtol=1e-6)
        np.testing.assert_array_equal(got["iy"], ix.reshape(n4, 4)[:, ::-1].ravel())


def test_size_t_loops_run_and_differentiate(loaded, compiled) -> None:
    rng = np.random.default_rng(7)
    n = 1000
    x, y = rng.random(n).astype(np.float32), rng.random(n).astype(np.float32)
    for got in run_both(loaded, compiled, "axpy", 3, 64, {"n": n, "a": 2.0, "x": x, "y": y}):
        np.testing.assert_allclose(got["y"], 2 * x + y, rtol=1e-6)
    m = rng.random((50, 7)).astype(np.float32)
    for got in run_both(loaded, compiled, "rowsum", 2, 32, {"rows": 50, "cols": 7, "m": m,
                                                            "out": np.zeros(50, np.float32)}):
        np.testing.assert_allclose(got["out"], (m * m).sum(1), rtol=1e-5)
    v = np.arange(400, dtype=np.float32)
    for got in run_both(loaded, compiled, "down", 1, 32, {"x": v, "y": np.zeros(400, np.float32), "n": 100}):
        np.testing.assert_allclose(got["y"], (v.reshape(4, 100)[:, ::-1] * 2).ravel())
    grad = polypy.grad(compiled.rowsum, wrt=["m"])
    dm, seed = np.zeros_like(m), rng.random(50).astype(np.float32)
    expected = 2 * m * seed[:, None]  # before the launch: the seed of an overwritten output is consumed
    grad[2, 32](50, 7, m, dm, np.zeros(50, np.float32), seed)
    np.testing.assert_allclose(dm, expected, rtol=1e-5)


def test_texture_references_are_hidden_read_only_parameters(loaded, compiled) -> None:
    """Kernel parameters, then one per texture it reads (in order of first use)."""
    names = [p.name for p in loaded.kernel("tex").params]
    assert names == ["out", "n", "t_v", "t_a"]
    n = 300
    ta = 0.5 * np.arange(n, dtype=np.float32)
    tv = ((np.arange(4 * n) % 13) * 0.25).astype(np.float32)
    i = np.arange(n)
    expected = ta + 2 * ta[n - 1 - i] + tv.reshape(n, 4)[:, 1] * tv.reshape(n, 4)[:, 3]
    for got in run_both(loaded, compiled, "tex", 3, 128, {"out": np.zeros(n, np.float32), "n": n, "t_v": tv,
                                                          "t_a": ta}):
        np.testing.assert_allclose(got["out"], expected, rtol=1e-6)


# ---------------------------------------------------------------------------- whole program
def _program_expected() -> str:
    hx = (np.arange(300) * 37) % 101
    y = []
    for v in hx.tolist():
        m = v & 7
        y.append({0: 10, 1: 8, 2: 8, 4: 7 if v > 50 else 9, 6: 0 if v > 50 else 2}.get(m, 5))
    y = np.array(y)
    s = int((y * (np.arange(300) % 7 + 1)).sum())
    hf = 0.5 * np.arange(50, dtype=np.float32) * 3 * 0.5
    hd = 0.25 * np.arange(200) * 2
    hin = ((np.arange(200) * 7) % 11).astype(np.float32) - 3
    sums = [hin[b * 64:(b + 1) * 64].sum() for b in range(4)]
    hv = (np.arange(400) % 9).astype(np.float32) * 0.5
    a = hv.reshape(100, 4)
    hw = np.stack([a[:, 3], a[:, 2] + 1, a[:, 1] * 2, a[:, 0]], 1).ravel()
    w = float((hw.astype(np.float64) * (np.arange(400) % 5 + 1)).sum())
    hb = []
    for i in range(100):
        u = (i * 2654435761) & 0xFFFFFFFF
        hb.append((bin(u).count("1") + 100 * (32 - u.bit_length()) + 10000 * (u & -u).bit_length()
                   + (u & 0xFFFFFF) * 3) & 0xFFFFFFFF)
    b = sum(v % 1000003 for v in hb)
    return (f"switch: {s} y[5] = {y[5]}\n"
            f"templates: {hf[49]:.2f} {hd[199]:.2f}\n"
            "block sums: %.1f %.1f %.1f %.1f\n" % tuple(sums)
            + f"vectors: {w:.2f} bits: {b} {hb[7]}\n")


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=300)


def test_program_through_cpp_and_emulator(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    out = tmp_path / "device_constructs.cpp"
    translated = _polypy("translate", str(PROGRAM), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    text = out.read_text()
    assert "if constexpr" in text  # the launch in run_scale picks its kernel instance at compile time
    exe = tmp_path / "device_constructs"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    expected = _program_expected()
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert native.returncode == 0, native.stderr
    assert outputs_match(native.stdout, expected, 1e-6) is None, native.stdout
    emulated = _polypy("run", str(PROGRAM), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    assert outputs_match(emulated.stdout, expected, 1e-6) is None, emulated.stdout


DEDUCED = r"""
#include <cstdio>
template <typename T> __global__ void fill(T* x, T v) { x[threadIdx.x] = v * (T)threadIdx.x; }
template <typename T> void run(T* x, T v) { fill<<<1, 32>>>(x, v); }
template void run<int>(int*, int);
int main() {
  float* a; double* b; int* c;
  cudaMalloc(&a, 32 * sizeof(float)); cudaMalloc(&b, 32 * sizeof(double)); cudaMalloc(&c, 32 * sizeof(int));
  run(a, 1.5f); run(b, 0.25); run(c, 3);
  float ha[32]; double hb[32]; int hc[32];
  cudaMemcpy(ha, a, sizeof ha, cudaMemcpyDeviceToHost);
  cudaMemcpy(hb, b, sizeof hb, cudaMemcpyDeviceToHost);
  cudaMemcpy(hc, c, sizeof hc, cudaMemcpyDeviceToHost);
  printf("%.2f %.3f %d\n", ha[31], hb[31], hc[31]);
}
"""


def test_host_template_instances_pick_kernels_deduced_from_their_arguments(tmp_path: pathlib.Path) -> None:
    """The kernel's template arguments are deduced at the launch; the host template's own
    arguments (an explicit instantiation among them) tell the instances apart."""
    need_compiler(cpp=True)
    source = tmp_path / "deduced.cu"
    source.write_text(DEDUCED)
    out = tmp_path / "deduced.cpp"
    translated = _polypy("translate", str(source), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    exe = tmp_path / "deduced"
    built = subprocess.run([find_compiler(cpp=True), "-O1", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert native.stdout == "46.50 7.750 93\n", native.stdout + native.stderr


# ---------------------------------------------------------------------------- refused, with a location
REFUSED = [
    ("switch-return-after-fallthrough",
     "__device__ int f(int v) {\n"
     "  int r = 0;\n"
     "  switch (v) { case 0: r = 1; case 1: if (v > 5) return 3; r += 2; break; }\n"
     "  return r;\n"
     "}\n"
     "__global__ void k(int* x) { x[0] = f(x[1]); }\n",
     "return inside a switch with fallthrough", (3, 31)),
    ("switch-declaration-across-cases",
     "__global__ void k(int* x) {\n"
     "  switch (x[0]) { case 0: int t; t = 1; x[1] = t; break; case 1: t = 2; x[1] = t; }\n"
     "}\n",
     "'t' is declared under another case label", (2, 66)),
    ("switch-statement-before-label",
     "__global__ void k(int* x) {\n"
     "  switch (x[0]) { x[1] = 0; case 0: x[1] = 1; }\n"
     "}\n",
     "statement before the first case label", (2, 19)),
    # float4 at an unknown offset is checked at run time (tests/test_aligned_views.py); float3's
    # alignment (4) is not its size (12): refused
    ("vector-view-at-unknown-offset",
     "__global__ void k(const float* x, float* y, int k) {\n"
     "  float3 v = reinterpret_cast<const float3*>(x + k)[threadIdx.x];\n"
     "  y[threadIdx.x] = v.x;\n"
     "}\n",
     "offset is a multiple of 12 bytes", (2, 14)),
    ("texture-object-of-double",
     "__global__ void k(cudaTextureObject_t t, double* y) { y[threadIdx.x] = tex1Dfetch<double>(t, threadIdx.x); }\n",
     "texture fetches of type 'double' are not supported", (1, 72)),
    ("texture-normalized-read",
     "texture<unsigned char, 1, cudaReadModeNormalizedFloat> t;\n"
     "__global__ void k(float* y) { y[threadIdx.x] = tex1Dfetch(t, threadIdx.x); }\n",
     "cudaReadModeNormalizedFloat", (2, 59)),
    ("surface-not-a-parameter",
     "__device__ cudaSurfaceObject_t s;\n"
     "__global__ void k() { surf2Dwrite(1.0f, s, threadIdx.x * 4, 0); }\n",
     "surf2Dwrite of a surface object that is not a parameter of the kernel is not supported", (2, 41)),
    ("host-template-never-instantiated",
     "template <int B> __global__ void k(float* x) { x[threadIdx.x] = B; }\n"
     "template <int B> void run(float* x) { k<B><<<1, B>>>(x); }\n"
     "int main() { return 0; }\n",
     "host function template that this program never instantiates", (2, 39)),
]


@pytest.mark.parametrize("name,source,message,where", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_with_location(name: str, source: str, message: str, where: tuple[int, int],
                               tmp_path: pathlib.Path) -> None:
    assert_load_refused(tmp_path, name, source, message, where)
