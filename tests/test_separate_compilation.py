"""Separate compilation and kernels as host values (issue 36 item 10, issue 41).

Programs of several ``.cu`` files, built as a Makefile builds them: ``polypy translate -c`` of each
file on its own, the C++ files compiled and linked together, the program run and its output
compared with what CUDA prints. A kernel declared in a header, launched in one file and defined
in another; host functions across files; ``extern __constant__`` written with cudaMemcpyToSymbol
in one file and read by a kernel of the other; kernels launched through pointers (an array of
them, as NVIDIA's transpose sample does), cudaLaunchKernel, cudaFuncGetAttributes and occupancy
through a kernel's address. Our own small programs, written into ``tmp_path``.
"""
from __future__ import annotations

import pathlib
import subprocess

from c_support import build_from_parts, need_compiler, polypy_cli as _polypy


def _run(program: pathlib.Path) -> str:
    r = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


HEADER = """\
#pragma once
__global__ void scale(float* x, float a, int n);
__global__ void scale(double* x, double a, int n);  // an overload: another C++ function
void run_scale(float* d, float a, int n);
extern __constant__ float coef[4];
extern __device__ int launches;
"""

KERNELS = """\
#include <cuda_runtime.h>
#include "k.h"
__constant__ float coef[4];
__device__ int launches;
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + coef[i % 4];
  if (i == 0) launches += 1;
}
__global__ void scale(double* x, double a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a - 1.0;
}
"""

HOST = """\
#include <cuda_runtime.h>
#include "k.h"
void run_scale(float* d, float a, int n) { scale<<<(n + 63) / 64, 64>>>(d, a, n); }
"""

MAIN = """\
#include <cstdio>
#include <cuda_runtime.h>
#include "k.h"
int main() {
  const int n = 100;
  float h[n];
  double g[n];
  for (int i = 0; i < n; ++i) { h[i] = i; g[i] = i; }
  float c[4] = {1, 2, 3, 4};
  cudaMemcpyToSymbol(coef, c, sizeof(c));
  int zero = 0;
  cudaMemcpyToSymbol(launches, &zero, sizeof(int));
  float* d;
  double* e;
  cudaMalloc(&d, n * sizeof(float));
  cudaMalloc(&e, n * sizeof(double));
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(e, g, n * sizeof(double), cudaMemcpyHostToDevice);
  scale<<<(n + 31) / 32, 32>>>(d, 3.0f, n);   // defined in kernels.cu
  run_scale(d, 2.0f, n);                       // a host function of host.cu
  scale<<<4, 32>>>(e, 0.5, n);                 // the double overload
  scale<<<1, 2048>>>(d, 1.0f, n);              // an invalid configuration: nothing runs
  printf("config %s\\n", cudaGetErrorName(cudaGetLastError()));
  void (*fd)(double*, double, int) = scale;      // the other file's kernels by address
  double half = 0.5;
  int count_n = n;
  void* args[3] = {&e, &half, &count_n};
  printf("cudaLaunchKernel %s\\n", cudaGetErrorName(cudaLaunchKernel((const void*)fd, dim3(4), dim3(32), args, 0, 0)));
  cudaFuncAttributes at;
  void (*fs)(float*, float, int) = scale;
  cudaError_t got = cudaFuncGetAttributes(&at, fs);
  printf("attributes %s %zu\\n", cudaGetErrorName(got), at.constSizeBytes);
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(g, e, n * sizeof(double), cudaMemcpyDeviceToHost);
  int count = 0;
  cudaMemcpyFromSymbol(&count, launches, sizeof(int));
  float back[4];
  cudaMemcpyFromSymbol(back, coef, sizeof(back));
  printf("%g %g %g %g %g %d %g\\n", h[0], h[1], h[99], g[0], g[99], count, back[3]);
  return 0;
}
"""


def test_kernel_launched_in_one_file_and_defined_in_another(tmp_path: pathlib.Path) -> None:
    """main.cu launches both overloads of ``scale`` (declared in k.h, defined in kernels.cu) and
    calls host.cu's ``run_scale``; coef and launches are extern in main.cu, defined in kernels.cu,
    written and read back with cudaMemcpyToSymbol/FromSymbol from main.cu and read (written) by
    the kernels: x[i] = (3 i + c[i%4]) * 2 + c[i%4] with c = 1..4; g[i] = 0.5 i - 1; two float
    launches counted (the one with 2048 threads is refused: cudaErrorInvalidConfiguration). The
    double overload, by its address, again through cudaLaunchKernel: g[i] = (0.5 i - 1) 0.5 - 1;
    the float one's attributes: the 16 bytes of coef it reads."""
    need_compiler(cpp=True)
    program = build_from_parts(tmp_path, {"k.h": HEADER, "kernels.cu": KERNELS, "host.cu": HOST, "main.cu": MAIN})
    assert _run(program) == ("config cudaErrorInvalidConfiguration\ncudaLaunchKernel cudaSuccess\n"
                             "attributes cudaSuccess 16\n3 12 606 -1.5 23.25 2 4\n")


VALUES = """\
#include <cstdio>
#include <cuda_runtime.h>
__global__ void copy(float* o, const float* i, int n) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) o[k] = i[k];
}
__global__ void negate(float* o, const float* i, int n) {
  __shared__ float tile[64];
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = k < n ? i[k] : 0.0f;
  __syncthreads();
  if (k < n) o[k] = -tile[threadIdx.x];
}
static double occupancy(const void* kernel, int block) {
  int blocks = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, block, 0);
  return blocks * block / 1024.0;
}
int main() {
  const int n = 200;
  float h[n], r[n];
  for (int k = 0; k < n; ++k) h[k] = k + 1;
  float *i, *o;
  cudaMalloc(&i, n * sizeof(float));
  cudaMalloc(&o, n * sizeof(float));
  cudaMemcpy(i, h, n * sizeof(float), cudaMemcpyHostToDevice);
  void (*kernels[2])(float*, const float*, int) = {&copy, negate};
  const char* names[2] = {"copy", "negate"};
  for (int which = 0; which < 2; ++which) {
    void (*kernel)(float*, const float*, int) = kernels[which];
    cudaFuncSetCacheConfig(kernel, cudaFuncCachePreferShared);
    kernel<<<(n + 63) / 64, 64>>>(o, i, n);
    cudaMemcpy(r, o, n * sizeof(float), cudaMemcpyDeviceToHost);
    printf("%s %g %g same %d\\n", names[which], r[0], r[n - 1], kernel == &copy);
  }
  int m = n;
  void* args[3] = {&o, &i, &m};
  cudaError_t e = cudaLaunchKernel((const void*)negate, dim3(4), dim3(64), args, 0, 0);
  cudaMemcpy(r, o, n * sizeof(float), cudaMemcpyDeviceToHost);
  printf("cudaLaunchKernel %s %g\\n", cudaGetErrorName(e), r[5]);
  printf("not a kernel %s\\n", cudaGetErrorName(cudaLaunchKernel((const void*)&occupancy, dim3(1), dim3(1), args, 0, 0)));
  cudaGetLastError();
  printf("bad config %s\\n", cudaGetErrorName(cudaLaunchKernel(copy, dim3(1), dim3(4096), args)));
  cudaGetLastError();
  cudaFuncAttributes a, b;
  cudaFuncGetAttributes(&a, copy);
  cudaFuncGetAttributes(&b, (const void*)negate);
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  printf("attributes %zu %zu max %d dyn %d %d version %d %d\\n", a.sharedSizeBytes, b.sharedSizeBytes,
         a.maxThreadsPerBlock == p.maxThreadsPerBlock, (size_t)a.maxDynamicSharedSizeBytes == p.sharedMemPerBlock,
         (size_t)b.maxDynamicSharedSizeBytes + b.sharedSizeBytes == p.sharedMemPerBlock,
         a.ptxVersion == p.major * 10 + p.minor, a.binaryVersion == a.ptxVersion);
  printf("attributes of a host function %s\\n", cudaGetErrorName(cudaFuncGetAttributes(&a, (const void*)&occupancy)));
  printf("occupancy %g %g\\n", occupancy((void*)copy, 256), occupancy((void*)negate, 1024));
  void (*none)(float*, const float*, int) = copy;
  none(o, i, n);  // called without <<<...>>>: nothing is launched
  printf("unconfigured %s\\n", cudaGetErrorName(cudaGetLastError()));
  return 0;
}
"""

VALUES_EXPECTED = """\
copy 1 200 same 1
negate -1 -200 same 0
cudaLaunchKernel cudaSuccess -6
not a kernel cudaErrorInvalidDeviceFunction
bad config cudaErrorInvalidConfiguration
attributes 0 256 max 1 dyn 1 1 version 1 1
attributes of a host function cudaErrorInvalidDeviceFunction
occupancy 0.25 1
unconfigured cudaErrorMissingConfiguration
"""


def test_kernels_as_values(tmp_path: pathlib.Path) -> None:
    """A kernel's address is its host stub's: an array of kernel pointers launched with <<<>>>
    (transpose), compared with ``&copy``; cudaLaunchKernel with an argument array (and with a host
    function: cudaErrorInvalidDeviceFunction; a block of 4096: cudaErrorInvalidConfiguration);
    cudaFuncGetAttributes (negate's 64-float tile: 256 static bytes, the rest of the device's 48 KiB
    per block for dynamic shared memory; the device's compute capability as versions); occupancy
    through ``(void*)kernel`` as the device reports it (one resident block per multiprocessor);
    a kernel pointer called without a configuration launches nothing. Compiled, and run by the
    reference emulator."""
    need_compiler(cpp=True)
    program = build_from_parts(tmp_path, {"values.cu": VALUES}, flags=())
    assert _run(program) == VALUES_EXPECTED
    r = _polypy("run", str(tmp_path / "values.cu"), "--emulate")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == VALUES_EXPECTED


OVERLOADS_THROUGH_POINTERS = """\
#include <cstdio>
#include <cuda_runtime.h>
__global__ void inc(float* a) { a[threadIdx.x] += 1.0f; }
__global__ void inc(double* a) { a[threadIdx.x] += 2.0; }
template <class T> void run(T* d, void (*k)(T*)) { k<<<1, 4>>>(d); inc<<<1, 4>>>(d); }
int main() {
  float *f; double *g;
  cudaMallocManaged(&f, 4 * sizeof(float));
  cudaMallocManaged(&g, 4 * sizeof(double));
  for (int i = 0; i < 4; ++i) { f[i] = i; g[i] = i; }
  run(f, inc);
  run<double>(g, &inc);
  cudaDeviceSynchronize();
  printf("%g %g\\n", f[3], g[3]);
  return 0;
}
"""


def test_overloaded_kernels_through_pointers_in_a_host_template(tmp_path: pathlib.Path) -> None:
    """``run<T>`` launches the kernel pointer it is given and the ``inc`` overload its ``T`` picks:
    one launch site through the pointer serves both instances (f[3] = 3 + 1 + 1, g[3] = 3 + 2 + 2);
    compiled and under the emulator."""
    need_compiler(cpp=True)
    src = tmp_path / "overloads.cu"
    src.write_text(OVERLOADS_THROUGH_POINTERS)
    for mode in ((), ("--emulate",)):
        r = _polypy("run", str(src), *mode)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout == "5 7\n", mode


def test_kernel_only_file_is_a_part_with_dash_c(tmp_path: pathlib.Path) -> None:
    """A file of kernels alone is a kernel library without ``-c``; with ``-c`` (or ``-dc``,
    ``-rdc=true``) it is a part of a program that exports its kernels' host stubs."""
    need_compiler(cpp=True)
    files = {"k.h": HEADER, "kernels.cu": KERNELS, "host.cu": HOST, "main.cu": MAIN}
    for flags in (("-dc",), ("-rdc=true",)):
        program = build_from_parts(tmp_path, files, flags)
        assert _run(program).endswith("3 12 606 -1.5 23.25 2 4\n")
    library = tmp_path / "lib.cpp"
    assert _polypy("translate", str(tmp_path / "kernels.cu"), "-o", str(library)).returncode == 0
    assert "void scale(float * x, float a, int n)" not in library.read_text()


DEVICE_HEADER = """\
#pragma once
__device__ float twice_plus(float x, float y);
extern __constant__ float bias[2];
"""

DEVICE_USER = """\
#include <cstdio>
#include <cuda_runtime.h>
#include "dev.h"
__global__ void apply(float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = twice_plus(a[i], bias[i % 2]);
}
int main() {
  float h[8] = {0, 1, 2, 3, 4, 5, 6, 7}, *d;
  float b[2] = {10, 20};
  cudaMemcpyToSymbol(bias, b, sizeof b);
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  apply<<<1, 8>>>(d, 8);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("%g %g %g\\n", h[0], h[1], h[7]);
  return 0;
}
"""

DEVICE_DEFINER = """\
#include "dev.h"
__constant__ float bias[2];
__device__ static float cube(float x) { return x * x * x; }
__device__ float twice_plus(float x, float y) { return 2.0f * x + y + cube(x) - x * x * x; }
"""


def test_device_function_of_another_file(tmp_path: pathlib.Path) -> None:
    """``-rdc=true``: a kernel of use.cu calls ``twice_plus``, declared in dev.h and defined in
    def.cu (which calls its own static ``cube``), and reads ``bias``, defined in def.cu: use.cu is
    translated with ``--device-sources def.cu`` and inlines the definition; 2 x + bias[i % 2].
    Without the option, or where the definition reads a variable use.cu does not declare: a
    located error."""
    need_compiler(cpp=True)
    files = {"dev.h": DEVICE_HEADER, "use.cu": DEVICE_USER, "def.cu": DEVICE_DEFINER}
    program = build_from_parts(tmp_path, files, ("-rdc=true",), {"use.cu": ("--device-sources", "TMP/def.cu")})
    assert _run(program) == "10 22 34\n"
    r = _polypy("translate", str(tmp_path / "use.cu"), "-o", str(tmp_path / "no.cpp"), "-rdc=true")
    assert r.returncode == 1 and "use.cu:6:21: error: device function 'twice_plus' is defined in another " \
        "translation unit" in r.stderr and "--device-sources FILE" in r.stderr, r.stderr
    # A variable the other file's device function reads and this file does not declare.
    (tmp_path / "hidden.cu").write_text('#include "dev.h"\n__constant__ float bias[2];\n__constant__ float hidden[1];\n'
                                        "__device__ float twice_plus(float x, float y) { return x + y + hidden[0]; }\n")
    r = _polypy("translate", str(tmp_path / "use.cu"), "-o", str(tmp_path / "no.cpp"), "-rdc=true",
                "--device-sources", str(tmp_path / "hidden.cu"))
    assert r.returncode == 1 and f"{tmp_path / 'hidden.cu'}:3:20: error: 'hidden' is a variable of" in r.stderr, r.stderr
    assert not (tmp_path / "no.cpp").exists()


def test_refusals_are_located(tmp_path: pathlib.Path) -> None:
    """What stays refused, with its location: a kernel template instance used as a value or
    launched without its definition in the file; a device function defined in another file."""
    cases = {
        "value.cu": ("template <int B> __global__ void t(int* a);\n"
                     "int main() {\n  void* f = (void*)t<4>;\n  (void)f;\n  return 0;\n}\n",
                     "4:20: error: kernel template instance 't' is used as a value but not defined in this file"),
        "extern_template.cu": ("template <int B> __global__ void t(int* a);\n"
                               "int main() {\n  t<4><<<1, 1>>>(0);\n  return 0;\n}\n",
                               "4:3: error: kernel template instance 't' is launched but not defined in this file"),
        "device.cu": ("__device__ float f(float x);\n__global__ void k(float* a) { a[0] = f(a[0]); }\n"
                      "int main() { k<<<1, 1>>>(0); return 0; }\n",
                      "3:38: error: device function 'f' is defined in another translation unit"),
    }
    for name, (body, message) in cases.items():
        src = tmp_path / name
        src.write_text("#include <cuda_runtime.h>\n" + body)
        out = tmp_path / (name + ".cpp")
        r = _polypy("translate", str(src), "-o", str(out), "-rdc=true")
        assert r.returncode == 1, (name, r.stderr)
        assert f"{src}:{message}" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and not out.exists()
