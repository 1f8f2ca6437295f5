"""Whole programs (our own), compiled and emulated: an early ``return`` some threads may take
before a ``__syncthreads()``, checked at run time (polypy/passes/guard_early_returns.py), and
launches that leave out a kernel's default arguments (frontend/kernel_defaults.py)."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

MODES = ["compiled", "emulated"]

# Block b adds part[b] to its elements below len; `if (id >= len) return;` comes before the
# barrier. With len a multiple of the block no thread returns; otherwise the last block's
# threads past len would, and the launch stops with an error naming the return.
EARLY_RETURN = r"""
#include <cstdio>
#include <cstdlib>
__global__ void add_part(int* data, const int* part, int len) {
  __shared__ int buf;
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id >= len) return;
  if (threadIdx.x == 0) buf = part[blockIdx.x];
  __syncthreads();
  data[id] += buf;
}
int main(int argc, char** argv) {
  int block = atoi(argv[1]), grid = atoi(argv[2]), len = atoi(argv[3]);
  int *d, *p;
  cudaMallocManaged(&d, grid * block * sizeof(int));
  cudaMallocManaged(&p, grid * sizeof(int));
  for (int i = 0; i < grid * block; i++) d[i] = i;
  for (int b = 0; b < grid; b++) p[b] = 1000 * (b + 1);
  add_part<<<grid, block>>>(d, p, len);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) { printf("error: %s\n", cudaGetErrorString(e)); return 0; }
  long s = 0;
  for (int i = 0; i < len; i++) s += d[i];
  printf("sum %ld\n", s);
  return 0;
}
"""


def _run(tmp_path, source: str, mode: str, *args: str) -> subprocess.CompletedProcess:
    if mode == "compiled" and shutil.which("c++") is None:
        pytest.skip("no C++ compiler (c++) to build the translated program")
    src = tmp_path / "prog.cu"
    src.write_text(source)
    cmd = [sys.executable, "-m", "polypy.driver.cli", "run"] + (["--emulate"] if mode == "emulated" else []) + \
        [str(src), "--", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("block, grid", [(32, 4), (64, 3)])
def test_an_early_return_no_thread_takes_runs_the_barrier_after_it(tmp_path, mode, block, grid) -> None:
    length = block * grid
    result = _run(tmp_path, EARLY_RETURN, mode, str(block), str(grid), str(length))
    assert result.returncode == 0, result.stderr
    want = sum(range(length)) + sum(1000 * (i // block + 1) for i in range(length))
    assert result.stdout.strip() == f"sum {want}", result.stdout + result.stderr


@pytest.mark.parametrize("mode", MODES)
def test_an_early_return_some_threads_take_stops_the_launch(tmp_path, mode) -> None:
    result = _run(tmp_path, EARLY_RETURN, mode, "32", "4", "100")
    assert result.returncode == 0, result.stderr
    assert "error: device-side assert triggered" in result.stdout, result.stdout + result.stderr
    assert "prog.cu:7: add_part: block: [3,0,0]" in result.stderr
    assert "reaches the __syncthreads() after this return" in result.stderr


def test_returns_elsewhere_before_a_barrier_stay_refused(tmp_path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(int* x, int n) {\n  for (int i = 0; i < 2; i++) {\n"
                   "    if (threadIdx.x >= n) return;\n  }\n  __syncthreads();\n  x[threadIdx.x] = 1;\n}\n")
    result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o",
                             str(tmp_path / "k.cpp")], capture_output=True, text=True, timeout=600)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{src}:5:3: error: __syncthreads() under thread-dependent control" in result.stderr, result.stderr


DEFAULTS = r"""
#include <cstdio>
__global__ void k(int* x, int w, int* p = NULL, float s = 1.5f, unsigned n = 3u, long long big = -5) {
  int i = threadIdx.x;
  x[i] = w * i + (p != NULL ? 1000 : 0) + (int)(s * 2) + n + (int)big;
  if (p != NULL) p[i] = i;
}
int main() {
  int *x, *p;
  cudaMallocManaged(&x, 32 * sizeof(int));
  cudaMallocManaged(&p, 32 * sizeof(int));
  k<<<1, 32>>>(x, 2);
  cudaDeviceSynchronize();
  printf("%d %d\n", x[5], x[31]);
  k<<<1, 32>>>(x, 2, p);
  cudaDeviceSynchronize();
  printf("%d %d %d\n", x[5], x[31], p[7]);
  k<<<1, 32>>>(x, 2, nullptr, 2.25f);
  cudaDeviceSynchronize();
  printf("%d\n", x[5]);
  return 0;
}
"""


@pytest.mark.parametrize("mode", MODES)
def test_launches_that_leave_out_default_arguments(tmp_path, mode) -> None:
    result = _run(tmp_path, DEFAULTS, mode)
    assert result.returncode == 0, result.stderr
    # w*i + (p ? 1000 : 0) + (int)(s*2) + n + big
    assert result.stdout.split("\n")[:3] == [f"{10 + 3 + 3 - 5} {62 + 3 + 3 - 5}",
                                             f"{1010 + 3 + 3 - 5} {1062 + 3 + 3 - 5} 7", f"{10 + 4 + 3 - 5}"]


OBJECT_DEFAULTS = r"""
#include <cstdio>
template <typename T> struct Min { __device__ T operator()(T a, T b) const { return a < b ? a : b; } };
struct Offset { int by; __host__ __device__ Offset() : by(7) {} };
struct Pair { int a, b; };
template <class Op>
__global__ void k(int* x, const int* y, Op op = Op(), Offset o = Offset(), Pair p = {}, Pair q = Pair{}) {
  int i = threadIdx.x;
  x[i] = op(x[i], y[i]) + o.by + p.a + p.b + q.a + q.b;
}
int main() {
  int *x, *y;
  cudaMallocManaged(&x, 32 * sizeof(int));
  cudaMallocManaged(&y, 32 * sizeof(int));
  for (int i = 0; i < 32; ++i) { x[i] = i; y[i] = 31 - i; }
  k<Min<int>><<<1, 32>>>(x, y);
  cudaDeviceSynchronize();
  printf("%d %d %d\n", x[0], x[20], x[31]);
  return 0;
}
"""


@pytest.mark.parametrize("mode", MODES)
def test_value_initialized_objects_as_default_arguments(tmp_path, mode) -> None:
    # `Op op = Op()` (a function object's default) used to be refused as "not a constant".
    result = _run(tmp_path, OBJECT_DEFAULTS, mode)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == f"{0 + 7} {11 + 7} {0 + 7}"


def test_a_default_argument_that_is_not_a_constant_is_refused_at_the_launch(tmp_path) -> None:
    src = tmp_path / "d.cu"
    src.write_text("int g = 3;\n__global__ void k(int* x, int w = g) { x[threadIdx.x] = w; }\n"
                   "int main() {\n  int* x;\n  cudaMallocManaged(&x, 128);\n  k<<<1, 32>>>(x);\n"
                   "  cudaDeviceSynchronize();\n  return 0;\n}\n")
    result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o",
                             str(tmp_path / "d.cpp")], capture_output=True, text=True, timeout=600)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{src}:6:3: error: the default argument of kernel parameter 'w' is not a constant" in result.stderr, \
        result.stderr
    assert not (tmp_path / "d.cpp").exists()
