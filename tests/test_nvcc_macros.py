"""nvcc's predefined macros (issue 36, item 7): ``__CUDACC__``, ``__NVCC__`` and
``__CUDACC_VER_MAJOR__/MINOR__`` as nvcc 12.0 sets them in both passes, and ``__CUDA_ARCH__`` in
the device pass only (``frontend.device_pass``: a file that names it is read twice, kernels from
the device pass, host code from the host pass), sm_80 unless ``-arch`` says otherwise.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import need_compiler, run_emulated
from polypy.errors import UserError

PROGRAM = r"""
#include <cstdio>
#include "where.h"
__global__ void k(int* out) {
#if __CUDACC_VER_MAJOR__ >= 9
  out[threadIdx.x] = where() + __shfl_down_sync(0xffffffff, (int)threadIdx.x, 1);
#else
  out[threadIdx.x] = where() + __shfl_down((int)threadIdx.x, 1);
#endif
}
int main() {
  int* d;
  cudaMalloc(&d, 32 * sizeof(int));
  k<<<1, 32>>>(d);
  int h[32];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
#if defined(__CUDACC__) && defined(__NVCC__)
  printf("%d %d host %d nvcc %d.%d\n", h[0], h[31], where(), __CUDACC_VER_MAJOR__, __CUDACC_VER_MINOR__);
#endif
  return 0;
}
"""

# The only mention of __CUDA_ARCH__ is in the user's header: it decides the second pass too.
HEADER = r"""
__host__ __device__ inline int where() {
#ifdef __CUDA_ARCH__
  return __CUDA_ARCH__;
#else
  return -1;
#endif
}
"""


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture()
def program(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "where.h").write_text(HEADER)
    path = tmp_path / "arch.cu"
    path.write_text(PROGRAM)
    return path


@pytest.mark.parametrize("way", ["emulate", "cpp"])
@pytest.mark.parametrize("arch,value", [(None, 800), ("sm_70", 700), ("sm_90", 900)])
def test_cuda_arch_in_device_code_only(program: pathlib.Path, way: str, arch: str | None, value: int) -> None:
    """Device code sees __CUDA_ARCH__ (sm_80 by default), host code does not; the version macros
    take the `_sync` branch in device code and print 12.0 on the host."""
    if way == "cpp":
        need_compiler(cpp=True)
    args = ["run", str(program)] + (["--emulate"] if way == "emulate" else []) + (["-arch", arch] if arch else [])
    result = _polypy(*args)
    assert result.returncode == 0, result.stderr
    # Lane 0 reads lane 1; lane 31 has no lane 32 and keeps its own value.
    assert result.stdout == f"{value + 1} {value + 31} host -1 nvcc 12.0\n"


def test_kernel_library_reads_the_device_pass(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "lib.cu"
    path.write_text("__global__ void k(int* out) {\n#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 600\n"
                    "  out[threadIdx.x] = __CUDA_ARCH__ + __CUDACC_VER_MAJOR__;\n#else\n"
                    "  out[threadIdx.x] = -7;\n#endif\n}\n")
    out = run_emulated(polypy.load(str(path)).kernel("k"), 1, 4, {"out": np.zeros(4, np.int32)})
    np.testing.assert_array_equal(out["out"], 812)
    got = np.zeros(4, np.int32)
    polypy.compile(str(path)).k[1, 4](got)
    np.testing.assert_array_equal(got, 812)


REFUSED = [
    ("host-only-kernel",
     "#ifndef __CUDA_ARCH__\n__global__ void extra(int* a) { a[0] = 1; }\n#endif\n"
     "__global__ void k(int* a) { a[0] = 2; }\n",
     "kernel 'extra' is defined only when __CUDA_ARCH__ is not defined", (2, 17)),
    ("device-only-kernel",
     "#ifdef __CUDA_ARCH__\n__global__ void extra(int* a) { a[0] = 1; }\n#endif\n"
     "__global__ void k(int* a) { a[0] = 2; }\n",
     "kernel 'extra' is defined only when __CUDA_ARCH__ is defined", (2, 17)),
    ("other-parameters",
     "#ifdef __CUDA_ARCH__\n__global__ void k(int* a, int n) { a[0] = n; }\n#else\n"
     "__global__ void k(int* a, float n) { a[0] = 1; }\n#endif\n",
     "has other parameters when __CUDA_ARCH__ is defined", (2, 17)),
]


@pytest.mark.parametrize("name,source,message,where", REFUSED, ids=[c[0] for c in REFUSED])
def test_passes_that_disagree_are_refused(name: str, source: str, message: str, where: tuple[int, int],
                                          tmp_path: pathlib.Path) -> None:
    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    with pytest.raises(UserError) as info:
        polypy.load(str(path))
    assert message in info.value.message, info.value.render()
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == where, info.value.render()


# The kernel's body is under `#if __CUDA_ARCH__ >= 700` (simpleAWBarrier's shape): the host pass
# sees an empty kernel, which writes nothing; the host program must copy back what the device
# pass's kernel writes, and report its __shared__ bytes.
OTHER_BODIES = r"""
#include <cstdio>
__global__ void k(const int* in, int* a, int* b, int n) {
#if __CUDA_ARCH__ >= 700
  __shared__ int tile[64];
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = t < n ? in[t] : 0;
  __syncthreads();
  if (t < n) {
    a[t] = tile[blockDim.x - 1 - threadIdx.x] * 3;
    b[t] = (int)threadIdx.x;
  }
#endif
}
int main(int argc, char** argv) {
  int blocks = argc > 1 ? 3 : 2, threads = argc > 1 ? 64 : 32, n = blocks * threads - 5;
  int h[192], *in, *a, *b;
  for (int i = 0; i < n; ++i) h[i] = i * i - 7;
  cudaMalloc(&in, n * sizeof(int)); cudaMalloc(&a, n * sizeof(int)); cudaMalloc(&b, n * sizeof(int));
  cudaMemcpy(in, h, n * sizeof(int), cudaMemcpyHostToDevice);
  k<<<blocks, threads>>>(in, a, b, n);
  int ha[192], hb[192];
  cudaMemcpy(ha, a, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(hb, b, n * sizeof(int), cudaMemcpyDeviceToHost);
  long long sa = 0, sb = 0;
  for (int i = 0; i < n; ++i) { sa += (long long)ha[i] * (i + 1); sb += hb[i]; }
  cudaFuncAttributes attr;
  cudaFuncGetAttributes(&attr, k);
  printf("%lld %lld %d\n", sa, sb, (int)attr.sharedSizeBytes);
  return 0;
}
"""


def _other_bodies_reference(blocks: int, threads: int) -> str:
    n = blocks * threads - 5
    inp = [i * i - 7 for i in range(n)] + [0] * 5
    a = [3 * inp[(t // threads) * threads + threads - 1 - t % threads] for t in range(n)]
    sa = sum(v * (i + 1) for i, v in enumerate(a))
    return f"{sa} {sum(t % threads for t in range(n))} 256\n"


@pytest.mark.parametrize("way", ["emulate", "cpp"])
def test_a_kernel_body_only_in_the_device_pass_runs_with_the_device_pass_copies(tmp_path: pathlib.Path,
                                                                                way: str) -> None:
    if way == "cpp":
        need_compiler(cpp=True)
    path = tmp_path / "bodies.cu"
    path.write_text(OTHER_BODIES)
    for extra, shape in (([], (2, 32)), (["big"], (3, 64))):
        result = _polypy("run", str(path), *(["--emulate"] if way == "emulate" else []), "--", *extra)
        assert result.returncode == 0, result.stderr
        assert result.stdout == _other_bodies_reference(*shape)


def test_a_kernel_library_may_write_other_arguments_per_pass(tmp_path: pathlib.Path) -> None:
    """Without host code no copy depends on the host pass's view: the device pass is taken."""
    path = tmp_path / "lib.cu"
    path.write_text("__global__ void k(int* a, int* b) {\n#ifdef __CUDA_ARCH__\n  a[threadIdx.x] = 1;\n#else\n"
                    "  b[threadIdx.x] = 1;\n#endif\n}\n")
    out = run_emulated(polypy.load(str(path)).kernel("k"), 1, 2, {"a": np.zeros(2, np.int32), "b": np.zeros(2, np.int32)})
    np.testing.assert_array_equal(out["a"], 1)
    np.testing.assert_array_equal(out["b"], 0)
