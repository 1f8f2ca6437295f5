"""Kernel launches from device code (CUDA dynamic parallelism): whole programs translated, built
and run, checked for exact output; the located refusals of what is not supported (the emulator,
the LLVM backend, kernel libraries, gradients, device-side synchronization, shared-memory
pointers as arguments)."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

import polypy
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.parser import parse_module
from polypy.ir.printer import print_module
from polypy.ir.visitor import walk

PROGRAM = r"""
#include <cstdio>
__device__ int g_log[64];
__device__ int g_count;

__global__ void scale(const int *in, int *out, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x + (blockIdx.y * gridDim.x) * blockDim.x;
  if (i < n) out[i] = in[i] * k;
}

// The parent writes `in` and launches a child that reads it: the child sees the write.
__global__ void produce(int *in, int *out, int n, int gx, int gy, int bx) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) in[i] = i + 1;
  if (i == 0) {
    dim3 g(gx, gy);
    scale<<<g, bx>>>(in, out, n, 3);
  }
}

__global__ void record(int tag) {
  if (threadIdx.x == 0) g_log[atomicAdd(&g_count, 1)] = tag;
}

// One thread launches two ordinary children and a tail launch between them: the tail child runs last.
__global__ void order(int base) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  record<<<1, 2, 0, s>>>(base + 1);
  record<<<1, 2, 0, cudaStreamTailLaunch>>>(base + 9);
  record<<<1, 2>>>(base + 2);
  cudaStreamDestroy(s);
  if (threadIdx.x == 0) g_log[atomicAdd(&g_count, 1)] = base;
}

// Recursion: a kernel launching itself; each block counts itself.
__global__ void tree(int depth, int max_depth, int *blocks) {
  if (threadIdx.x == 0) atomicAdd(blocks + depth, 1);
  if (depth + 1 < max_depth) tree<<<gridDim.x, blockDim.x>>>(depth + 1, max_depth, blocks);
}

// Sorting by recursive launches on sub-ranges (indices, one thread per grid).
__global__ void sort(unsigned *data, int left, int right) {
  if (right - left < 4) {
    for (int i = left; i <= right; ++i)
      for (int j = i + 1; j <= right; ++j)
        if (data[j] < data[i]) { unsigned t = data[i]; data[i] = data[j]; data[j] = t; }
    return;
  }
  unsigned pivot = data[(left + right) / 2];
  int l = left, r = right;
  while (l <= r) {
    while (data[l] < pivot) l++;
    while (data[r] > pivot) r--;
    if (l <= r) { unsigned t = data[l]; data[l] = data[r]; data[r] = t; l++; r--; }
  }
  if (left < r) sort<<<1, 1>>>(data, left, r);
  if (l < right) sort<<<1, 1>>>(data, l, right);
}

// A launch with an invalid configuration launches nothing and is the thread's last error.
__global__ void bad(int *status) {
  record<<<1, 2048>>>(77);
  int e = cudaGetLastError();
  int again = cudaGetLastError();
  status[0] = e;
  status[1] = again;
}

int main() {
  const int n = 37;
  int *in, *out;
  cudaMalloc(&in, n * sizeof(int));
  cudaMalloc(&out, n * sizeof(int));
  const int shapes[4][3] = {{1, 1, 64}, {3, 1, 16}, {2, 3, 8}, {37, 1, 1}};
  for (int s = 0; s < 4; ++s) {
    cudaMemset(out, 0, n * sizeof(int));
    produce<<<(n + 7) / 8, 8>>>(in, out, n, shapes[s][0], shapes[s][1], shapes[s][2]);
    int h[n];
    cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
    int sum = 0, ok = 1;
    for (int i = 0; i < n; ++i) { sum += h[i]; ok &= h[i] == 3 * (i + 1); }
    printf("shape %d: sum %d ok %d\n", s, sum, ok);
  }
  order<<<1, 1>>>(10);
  cudaDeviceSynchronize();
  int count, log[64];
  cudaMemcpyFromSymbol(&count, g_count, sizeof count);
  cudaMemcpyFromSymbol(log, g_log, sizeof log);
  printf("log");
  for (int i = 0; i < count; ++i) printf(" %d", log[i]);
  printf("\n");
  int *blocks;
  cudaMalloc(&blocks, 8 * sizeof(int));
  cudaMemset(blocks, 0, 8 * sizeof(int));
  tree<<<2, 3>>>(0, 4, blocks);
  int hb[8];
  cudaMemcpy(hb, blocks, sizeof hb, cudaMemcpyDeviceToHost);
  printf("tree %d %d %d %d %d\n", hb[0], hb[1], hb[2], hb[3], hb[4]);
  const int m = 300;
  unsigned hd[m], *d;
  srand(7);
  for (int i = 0; i < m; ++i) hd[i] = rand() % 1000;
  cudaMalloc(&d, sizeof hd);
  cudaMemcpy(d, hd, sizeof hd, cudaMemcpyHostToDevice);
  sort<<<1, 1>>>(d, 0, m - 1);
  cudaMemcpy(hd, d, sizeof hd, cudaMemcpyDeviceToHost);
  int sorted = 1;
  for (int i = 1; i < m; ++i) sorted &= hd[i - 1] <= hd[i];
  printf("sorted %d\n", sorted);
  int *status, hs[2];
  cudaMalloc(&status, sizeof hs);
  int before = 0;
  cudaMemcpyFromSymbol(&before, g_count, sizeof before);
  bad<<<1, 1>>>(status);
  cudaMemcpy(hs, status, sizeof hs, cudaMemcpyDeviceToHost);
  int after = 0;
  cudaMemcpyFromSymbol(&after, g_count, sizeof after);
  printf("bad %d %d launched %d host %d\n", hs[0], hs[1], after - before, (int)cudaGetLastError());
  return 0;
}
"""

EXPECTED = [f"shape {s}: sum {3 * 37 * 38 // 2} ok 1" for s in range(4)] + [
    # The parent's own record, then its children in launch order, the tail launch last (each
    # record child has 2 threads, thread 0 records).
    "log 10 11 12 19",
    # 2 blocks of the host grid, each of the 6 threads launches a 2-block grid: 12, 72, 432.
    "tree 2 12 72 432 0",
    "sorted 1",
    "bad 9 0 launched 0 host 0",
]


def _translate(tmp_path, source: str, name: str = "p") -> subprocess.CompletedProcess:
    src = tmp_path / f"{name}.cu"
    src.write_text(source)
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o",
                           str(tmp_path / f"{name}.cpp")], capture_output=True, text=True, cwd=tmp_path)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
def test_launches_from_device_code_run_after_their_parent(tmp_path):
    done = _translate(tmp_path, PROGRAM)
    assert done.returncode == 0, done.stderr
    build = subprocess.run(["g++", "-O2", "-fopenmp", str(tmp_path / "p.cpp"), "-o", str(tmp_path / "p"), "-lm"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(tmp_path / "p")], capture_output=True, text=True, cwd=tmp_path,
                         env={"OMP_NUM_THREADS": "2"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == EXPECTED


def test_launch_ir_prints_and_parses(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(PROGRAM)
    module = polypy.load(str(path))
    launches = [x for k in module.kernels for x in walk(k) if isinstance(x, n.Launch)]
    assert {x.kernel for x in launches} == {"scale", "record", "tree", "sort"}
    assert {x.stream for x in launches} == {"stream", "tail"}
    text = print_module(module)
    assert "launch.tail record grid(1u, 1u, 1u) block(2u, 1u, 1u) shmem(0ul) (" in text
    again = parse_module(text)
    assert [k.body for k in again.kernels] == [k.body for k in module.kernels]


KERNEL = r"""
__global__ void child(float *x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= 2.0f; }
__global__ void parent(float *x, int n) { if (threadIdx.x == 0) child<<<1, n>>>(x, n); }
"""


def test_llvm_backend_and_emulator_refuse_at_the_launch(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(KERNEL)
    import numpy as np
    x = np.ones(4, np.float32)
    with pytest.raises(UserError) as info:
        polypy.compile(str(path)).parent[1, 4](x, 4)
    assert "launches from device code" in str(info.value) and info.value.loc.line == 3
    assert (x == 1).all()
    from polypy.emulator import emulate
    with pytest.raises(UserError) as info:
        emulate(polypy.load(str(path)).kernel("parent"), 1, 4, [np.zeros(4, np.float32), 4])
    assert "emulator does not run kernel launches from device code" in str(info.value) and info.value.loc.line == 3


def test_gradient_of_a_launching_kernel_is_refused(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(KERNEL)
    from autodiff import differentiate
    with pytest.raises(UserError) as info:
        differentiate(polypy.load(str(path)).kernel("parent"))
    assert "dynamic parallelism" in str(info.value) and info.value.loc.line == 3


@pytest.mark.parametrize("body, message", [
    ("child<<<1, 4>>>(x, 4); cudaDeviceSynchronize();", "cudaDeviceSynchronize in device code"),
    ("__shared__ float s[4]; child<<<1, 4>>>(s, 4);", "does not point into one of the kernel's pointer"),
    ("child<<<1, 4>>>(g, 4);", "pointers to __device__ arrays are not supported"),
    ("float *d; cudaMalloc((void **)&d, 16);", "cudaMalloc in device code"),
    ("pair<<<1, 1>>>(make_float2(1, 2));", "parameter 'v' of type 'float2' of a kernel launched from device code"),
])
def test_unsupported_device_runtime_uses_are_located_errors(tmp_path, body, message):
    source = ("__global__ void child(float *x, int n) { x[threadIdx.x] = n; }\n"
              "__device__ float g[4]; __global__ void pair(float2 v) { g[0] = v.x; }\n"
              f"__global__ void parent(float *x, int n) {{ {body} }}\n"
              "int main() { float *x; cudaMalloc(&x, 16); parent<<<1, 1>>>(x, 4); return 0; }\n")
    done = _translate(tmp_path, source)
    assert done.returncode == 1
    assert message in done.stderr
    assert "p.cu:3:" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "p.cpp").exists()


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                    reason="no C++ compiler: polypy run cannot build the host program")
def test_emulated_program_refuses_before_running(tmp_path):
    src = tmp_path / "p.cu"
    src.write_text(KERNEL + "int main() { float *x; cudaMalloc(&x, 16); parent<<<1, 1>>>(x, 4);"
                            " printf(\"ran\\n\"); return 0; }\n")
    run = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", "--emulate", str(src)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1
    assert "p.cu:3:" in run.stderr and "emulator does not run kernel launches" in run.stderr
    assert "ran" not in run.stdout and "Traceback" not in run.stderr


POINTERS = r"""
__global__ void partition(unsigned *data, int left, int right, int *res) {
  unsigned *lptr = data + left, *rptr = data + right;
  unsigned pivot = data[(left + right) / 2];
  while (lptr <= rptr) {
    unsigned lval = *lptr, rval = *rptr;
    while (lval < pivot) { lptr++; lval = *lptr; }
    while (rval > pivot) { rptr--; rval = *rptr; }
    if (lptr <= rptr) { *lptr++ = rval; *rptr-- = lval; }
  }
  unsigned *p = data, *q = p++;
  res[0] = rptr - data;
  res[1] = lptr - data;
  res[2] = (q == data) + 2 * (p > q) + 4 * (p != q) + 8 * (lptr >= rptr);
}
"""


def _partition(data, left, right):
    """The kernel above in Python (indices for pointers)."""
    lp, rp = left, right
    pivot = data[(left + right) // 2]
    while lp <= rp:
        lval, rval = data[lp], data[rp]
        while lval < pivot:
            lp += 1
            lval = data[lp]
        while rval > pivot:
            rp -= 1
            rval = data[rp]
        if lp <= rp:
            data[lp], data[rp] = rval, lval
            lp, rp = lp + 1, rp - 1
    return [rp, lp, 1 + 2 + 4 + 8 * (lp >= rp)]


@pytest.mark.parametrize("seed, n", [(0, 2), (1, 7), (2, 40), (3, 129)])
def test_pointer_post_increment_and_comparisons(tmp_path, seed, n):
    import numpy as np
    from polypy.emulator import emulate
    path = tmp_path / "k.cu"
    path.write_text(POINTERS)
    data = np.random.default_rng(seed).integers(0, n, n).astype(np.uint32)
    want = data.copy()
    expected = _partition(want, 0, n - 1)
    res = np.zeros(3, np.int32)
    emulate(polypy.load(str(path)).kernel("partition"), 1, 1, [data, 0, n - 1, res])
    assert res.tolist() == expected
    assert (data == want).all()


def test_kernel_library_refuses_a_launch_from_device_code(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    for emit in ("c", "cpp"):
        out = tmp_path / f"k.{emit}"
        done = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "--emit", emit,
                               "-o", str(out)], capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 1 and "Traceback" not in done.stderr and not out.exists()
        assert f"{src}:3:" in done.stderr and "whole programs only" in done.stderr
