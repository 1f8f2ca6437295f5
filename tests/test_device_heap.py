"""The device heap (docs/device_heap.md): ``malloc``/``free``, ``new``/``delete`` of numbers in
device code, ``cudaLimitMallocHeapSize``, heap pointers kept in ``__device__`` pointer variables
across launches, null tests of them. Each program is written into ``tmp_path``, run with ``polypy
run`` (the C backend) and ``polypy run --emulate``, and its output compared with values computed
by hand in the test."""
from __future__ import annotations

import pathlib

import pytest

import polypy
from polypy.errors import UserError

from c_support import assert_translate_refused, need_compiler, polypy_cli as _polypy


PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
__device__ int* d_rows[4] = {nullptr, 0};
__device__ float* d_acc = NULL;
struct Pair { float* src; int n; };
__constant__ Pair d_pair;

// a block kept in a pointer member of a __device__ record, set by one launch, used by later ones
struct Vec { int* items; int n; };
__device__ Vec d_vec;
__global__ void vec_setup(int n) { d_vec.items = new int[n]; d_vec.n = n; }
__global__ void vec_fill() { for (int i = 0; i < d_vec.n; ++i) d_vec.items[i] = i * i; }
__global__ void vec_sum(int* out) {
  int s = 0;
  for (int i = 0; i < d_vec.n; ++i) s += d_vec.items[i];
  out[0] = s;
  delete[] d_vec.items;
}

// a null test of a pointer member of a __constant__ record (set by the host, or left null)
__global__ void pair_test(float* out) { out[0] = d_pair.src ? d_pair.src[1] : -2.0f; }

// per-thread scratch: malloc, use, free in one launch
__global__ void scratch(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float* buf = (float*)malloc(n * sizeof(float));
  if (buf == NULL) { out[i] = -1.0f; return; }
  for (int k = 0; k < n; ++k) buf[k] = i + k;
  float s = 0;
  for (int k = 0; k < n; ++k) s += buf[k];
  free(buf);
  out[i] = s;
}

// blocks made by one launch, kept in __device__ pointers, used and freed by later ones
__global__ void setup(int n) {
  int t = threadIdx.x;
  d_rows[t] = (int*)malloc(n * sizeof(int));
  if (t == 0) d_acc = (float*)malloc(sizeof(float));
}
__global__ void fill(int n) {
  int t = threadIdx.x;
  int* row = d_rows[t];
  if (!row) return;
  for (int k = 0; k < n; ++k) row[k] = 10 * t + k;
  if (t == 0) *d_acc = 0.5f;
}
__global__ void sum(int n, int* out, float* acc) {
  int t = threadIdx.x;
  int s = 0;
  for (int k = 0; k < n; ++k) s += d_rows[t][k];
  out[t] = s;
  if (t == 0) acc[0] = d_acc ? *d_acc : -1.0f;
}
__global__ void release() {
  int t = threadIdx.x;
  free(d_rows[t]);
  if (t == 0) free(d_acc);
}
__global__ void forget() { d_rows[threadIdx.x] = nullptr; }
__global__ void count_null(int* out) {
  int t = threadIdx.x;
  out[t] = d_rows[t] == nullptr ? 7 : 8;
}

// pointer arithmetic and comparisons in a block; a null test of malloc's result itself
__global__ void compare(float* out) {
  float* f = (float*)malloc(2 * sizeof(float));
  float* g = f + 1;
  *g = 2.5f;
  out[0] = (f == g - 1 && g != f) ? f[1] : -1.0f;
  out[1] = malloc(1 << 20) == NULL ? 3.0f : 4.0f;  // larger than the heap
  free(f);
}

// new and delete of numbers
__global__ void news(double* out, int n) {
  int t = threadIdx.x;
  double* v = new double[n];
  int* one = new int(7 + t);
  for (int i = 0; i < n; ++i) v[i] = 0.5 * i + t;
  double s = 0;
  for (int i = 0; i < n; ++i) s += v[i];
  out[t] = s + *one;
  delete[] v;
  delete one;
}

// a heap of 4096 bytes: two blocks of 2100 do not fit, a freed one is reused, neighbours merge
__global__ void exhaust(int* out) {
  char* a = (char*)malloc(2100);
  char* b = (char*)malloc(2100);
  out[0] = (a != NULL) + 2 * (b != NULL);
  free(a);
  char* c = (char*)malloc(1900);
  out[1] = c ? 1 : 0;
  free(b);
  free(c);
  char* d = (char*)malloc(4060);
  out[2] = !d ? 0 : 1;
  char* e = (char*)malloc(1);
  out[3] = e == 0;
  free(d);
  free(e);
}

int main() {
  float* out;
  cudaMalloc(&out, 64 * sizeof(float));
  int* iout; float* acc;
  cudaMalloc(&iout, 4 * sizeof(int));
  cudaMalloc(&acc, sizeof(float));
  sum<<<1, 4>>>(0, iout, acc);  // before setup: null pointers, as initialized
  float a;
  cudaMemcpy(&a, acc, sizeof a, cudaMemcpyDeviceToHost);
  printf("initial %g\n", a);
  pair_test<<<1, 1>>>(acc);
  cudaMemcpy(&a, acc, sizeof a, cudaMemcpyDeviceToHost);
  float two[2] = {5.0f, 6.0f};
  float* src;
  cudaMalloc(&src, sizeof two);
  cudaMemcpy(src, two, sizeof two, cudaMemcpyHostToDevice);
  Pair pr = {src, 2};
  cudaMemcpyToSymbol(d_pair, &pr, sizeof pr);
  pair_test<<<1, 1>>>(acc);
  float b;
  cudaMemcpy(&b, acc, sizeof b, cudaMemcpyDeviceToHost);
  printf("pair %g %g\n", a, b);
  size_t lim = 0;
  cudaDeviceGetLimit(&lim, cudaLimitMallocHeapSize);
  printf("default %zu\n", lim);
  printf("set %d\n", (int)cudaDeviceSetLimit(cudaLimitMallocHeapSize, 4096));
  scratch<<<2, 32>>>(out, 10);
  float h[64];
  cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
  printf("scratch %g %g %g\n", h[0], h[17], h[63]);
  compare<<<1, 1>>>(out);
  cudaMemcpy(h, out, 2 * sizeof(float), cudaMemcpyDeviceToHost);
  printf("compare %g %g\n", h[0], h[1]);
  setup<<<1, 4>>>(5);
  fill<<<1, 4>>>(5);
  sum<<<1, 4>>>(5, iout, acc);
  int r[4];
  cudaMemcpy(r, iout, sizeof r, cudaMemcpyDeviceToHost);
  cudaMemcpy(&a, acc, sizeof a, cudaMemcpyDeviceToHost);
  printf("rows %d %d %d %d %g\n", r[0], r[1], r[2], r[3], a);
  release<<<1, 4>>>();
  forget<<<1, 4>>>();
  count_null<<<1, 4>>>(iout);
  cudaMemcpy(r, iout, sizeof r, cudaMemcpyDeviceToHost);
  printf("null %d %d\n", r[0], r[3]);
  double* dout;
  cudaMalloc(&dout, 4 * sizeof(double));
  news<<<1, 4>>>(dout, 6);
  double dd[4];
  cudaMemcpy(dd, dout, sizeof dd, cudaMemcpyDeviceToHost);
  printf("new %g %g %g %g\n", dd[0], dd[1], dd[2], dd[3]);
  vec_setup<<<1, 1>>>(6);
  vec_fill<<<1, 1>>>();
  vec_sum<<<1, 1>>>(iout);
  cudaMemcpy(r, iout, sizeof(int), cudaMemcpyDeviceToHost);
  printf("vec %d\n", r[0]);
  exhaust<<<1, 1>>>(iout);
  cudaMemcpy(r, iout, sizeof r, cudaMemcpyDeviceToHost);
  printf("exhaust %d %d %d %d\n", r[0], r[1], r[2], r[3]);
  printf("late set %d\n", (int)cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1 << 20));
  cudaDeviceGetLimit(&lim, cudaLimitMallocHeapSize);
  printf("limit %zu %d\n", lim, (int)cudaDeviceSynchronize());
  return 0;
}
"""


def _expected() -> str:
    scratch = [sum(i + k for k in range(10)) for i in (0, 17, 63)]
    rows = [sum(10 * t + k for k in range(5)) for t in range(4)]
    news = [sum(0.5 * i + t for i in range(6)) + 7 + t for t in range(4)]
    # a 4096-byte heap (blocks: a 16-byte header, the size rounded up to 16): 64 scratch blocks of 64
    # bytes fill it exactly (all at once on a GPU, whatever the schedule); a (2128 bytes) fits, b then
    # does not (1968 left); c (1936) fits where a was; after frees the neighbours merge, so d (4080)
    # fits; its 16 bytes left are no block, so e (32) does not
    lines = ["initial -1", "pair -2 6", "default 8388608", "set 0", "scratch " + " ".join(f"{v:g}" for v in scratch), "compare 2.5 3",
             "rows " + " ".join(str(v) for v in rows) + " 0.5", "null 7 7",
             "new " + " ".join(f"{v:g}" for v in news), f"vec {sum(i * i for i in range(6))}",
             "exhaust 1 1 1 1",
             "late set 1",  # cudaErrorInvalidValue: the heap was made by the first launch using it
             "limit 4096 0"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("mode", ["--emulate", None])
def test_the_device_heap_runs_as_cuda_runs_it(mode: str | None, tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "heap.cu"
    src.write_text(PROGRAM)
    result = _polypy("run", str(src), *([mode] if mode else []), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == _expected()


STRESS = r"""
#include <cstdio>
__device__ float dot3(const float* a, int n) { float s = 0; for (int i = 0; i < n; ++i) s += a[i]; return s; }
__global__ void stress(float* out, int rounds) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0;
  for (int r = 0; r < rounds; ++r) {
    int n = 1 + (t + r) % 7;
    float* p = (float*)malloc(n * sizeof(float));
    if (!p) { acc = -1e9f; break; }
    for (int i = 0; i < n; ++i) p[i] = (float)(i + r);
    acc += dot3(p, n);
    free(p);
  }
  out[t] = acc;
}
__global__ void barrier(float* out) {
  int t = threadIdx.x;
  float* p = (float*)malloc(2 * sizeof(float));
  p[0] = t; p[1] = 2 * t;
  __syncthreads();
  out[t] = p[0] + p[1];
  free(p);
}
int main() {
  const int B = 16, T = 64, R = 5;
  float* out;
  cudaMalloc(&out, B * T * sizeof(float));
  stress<<<B, T>>>(out, R);
  static float h[B * T];
  cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int t = 0; t < B * T; ++t) {
    float e = 0;
    for (int r = 0; r < R; ++r) { int n = 1 + (t + r) % 7; for (int i = 0; i < n; ++i) e += i + r; }
    if (h[t] != e) ++bad;
  }
  printf("stress bad %d\n", bad);
  barrier<<<1, 64>>>(out);
  cudaMemcpy(h, out, 64 * sizeof(float), cudaMemcpyDeviceToHost);
  bad = 0;
  for (int t = 0; t < 64; ++t) if (h[t] != 3 * t) ++bad;
  printf("barrier bad %d\n", bad);
  return 0;
}
"""


@pytest.mark.parametrize("mode", ["--emulate", None])
def test_blocks_allocate_and_free_concurrently(mode: str | None, tmp_path: pathlib.Path) -> None:
    """1024 threads in 16 blocks (run on several CPU threads by the C backend) each malloc, fill,
    read through a device function and free a block five times; a block kept across a barrier.
    The program checks every thread's sum against the host's."""
    need_compiler(cpp=True)
    src = tmp_path / "stress.cu"
    src.write_text(STRESS)
    result = _polypy("run", str(src), *([mode] if mode else []), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "stress bad 0\nbarrier bad 0\n"


REUSE = r"""
#include <cstdio>
__global__ void k(int* out) {
  int t = threadIdx.x, s = 0;
  for (int r = 0; r < 3; ++r) {
    int* p = (int*)malloc(16);
    if (!p) { s = -1000; break; }
    p[0] = t + r; p[3] = 2;
    s += p[0] * p[3];
    free(p);
  }
  out[t] = s;
}
int main() {
  int* o; cudaMalloc(&o, 32 * 4);
  cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1024);
  k<<<1, 32>>>(o);
  int h[32]; cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost);
  int bad = 0; for (int t = 0; t < 32; ++t) if (h[t] != 2 * (3 * t + 3)) ++bad;
  printf("bad %d status %d\n", bad, (int)cudaDeviceSynchronize());
  return 0;
}
"""


@pytest.mark.parametrize("mode", ["--emulate", None])
def test_a_full_heap_reuses_blocks_other_threads_freed(mode: str | None, tmp_path: pathlib.Path) -> None:
    """32 threads fill a 1024-byte heap exactly (32 blocks of 32 bytes) when they run in lockstep
    (the emulator: every thread's malloc before any free), so the later rounds can only reuse freed
    blocks; compiled, the threads run one after the other and next fit hands each one the blocks
    the earlier threads freed. No race is reported and every sum is right."""
    need_compiler(cpp=True)
    src = tmp_path / "reuse.cu"
    src.write_text(REUSE)
    result = _polypy("run", str(src), *([mode] if mode else []), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "bad 0 status 0\n"


TWICE = r"""
#include <cstdio>
__global__ void twice() {
  int* p = (int*)malloc(8);
  free(p);
  free(p);
}
int main() {
  twice<<<1, 1>>>();
  printf("status %d\n", (int)cudaDeviceSynchronize());
  return 0;
}
"""


@pytest.mark.parametrize("mode", ["--emulate", None])
def test_freeing_a_block_twice_fails_the_launch_located(mode: str | None, tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "twice.cu"
    src.write_text(TWICE)
    result = _polypy("run", str(src), *([mode] if mode else []), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "status 710\n"  # cudaErrorAssert
    assert f"{src}:6: void twice(): block: [0,0,0], thread: [0,0,0] Assertion `free() of a pointer that is no " \
        "block of the device heap in use` failed." in result.stderr, result.stderr


REFUSED = ("struct Node {{ int v; Node* next; }};\n__constant__ float* c_p;\n__device__ float* d_p; "
           "struct V {{ float* a; }}; __device__ V d_v;\n"
           "__global__ void k(float* out) {{ {} }}\n"
           "int main() {{ float* o; cudaMalloc((void**)&o, 64); k<<<1, 1>>>(o); return 0; }}\n")


@pytest.mark.parametrize("body, message, column", [
    ("Node* n = new Node; out[0] = 1;", "'new' of 'Node' in device code is not supported", 43),
    ("Node* n = (Node*)malloc(16); out[0] = 1;", "device heap memory seen as 'Node' is not supported", 43),
    ("float* p = new float[2]{1, 2}; out[0] = p[0];", "'new T[n]' with an initializer in device code is not "
     "supported", 44),
    ("free(out);", "this pointer is not one polypy can pass to free", 38),
    ("c_p = (float*)malloc(8);", "'c_p' is in __constant__ memory: device code cannot write it", 33),
    ("d_v.a = (float*)malloc(8); out[0] = d_v.a[0];", "'d_v' holds device pointers in __constant__ or __device__ "
     "memory: a kernel storing a pointer to it and reading it is not supported", 33),
    ("d_p = (float*)malloc(8); out[0] = d_p[0];", "'d_p' holds device pointers in __constant__ or __device__ "
     "memory: a kernel storing to it is not supported", 33),
])
def test_what_is_not_supported_is_refused_located(body: str, message: str, column: int,
                                                  tmp_path: pathlib.Path) -> None:
    src = tmp_path / "refused.cu"
    src.write_text(REFUSED.format(body))
    assert_translate_refused(src, f"{src}:4:{column}", message)


def test_the_python_api_and_grad_refuse_the_heap_located(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "lib.cu"
    src.write_text("__global__ void k(float* out) { float* p = (float*)malloc(4); p[0] = 1.f; out[0] = p[0]; "
                   "free(p); }\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "lib.c"))
    assert result.returncode == 1
    assert f"{src}:1:52: error: kernel 'k' uses the device heap (malloc, free, new, delete in device code): " \
        "supported in whole programs only" in result.stderr, result.stderr
    with pytest.raises(UserError) as info:  # the Python API: polypy.load reads it, compile refuses it
        polypy.compile(src)
    assert (info.value.loc.line, info.value.loc.col) == (1, 52), info.value.render()
    assert "uses the device heap" in info.value.message
    result = _polypy("grad", str(src), "--kernel", "k", "-o", str(tmp_path / "g.cu"))
    assert result.returncode == 1
    assert f"{src}:1:52: error: gradients of kernels that use the device heap" in result.stderr, result.stderr
