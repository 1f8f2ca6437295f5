"""Dynamic shared memory limits of whole programs (hunt 5): a launch asking for more than its
kernel's limit (48 KiB less its static ``__shared__`` arrays, or what ``cudaFuncSetAttribute(k,
cudaFuncAttributeMaxDynamicSharedMemorySize, n)`` set, at most 163 KiB with the static arrays on
compute capability 8.0) fails with cudaErrorInvalidValue and runs nothing, as on a GPU. polypy ran
every such launch and reported success."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.c_support import need_compiler

LIMITS = r"""
#include <cstdio>
// a failed call is also the last error (cudaGetLastError), as in CUDA: cleared after each check
#define CHECK(x) do { cudaError_t e = (x); printf("%s: %s\n", #x, cudaGetErrorName(e)); cudaGetLastError(); } while (0)
__global__ void dyn(float *out, int n) {
  extern __shared__ float s[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = i * 0.5f;
  __syncthreads();
  float acc = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += s[n - 1 - i];
  out[threadIdx.x] = acc;
}
// 1 KiB of static shared memory: 47 KiB of dynamic by default
__global__ void mixed(float *out, int n) {
  __shared__ float fixed[256];
  extern __shared__ float s[];
  fixed[threadIdx.x] = threadIdx.x;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = fixed[255 - threadIdx.x] + s[n - 1];
}
template <int B>
__global__ void tdyn(int *out) {
  extern __shared__ int t[];
  t[threadIdx.x] = threadIdx.x * B;
  __syncthreads();
  out[threadIdx.x] = t[blockDim.x - 1 - threadIdx.x];
}
int main() {
  float *d; int *di;
  cudaMalloc(&d, 256 * sizeof(float));
  cudaMalloc(&di, 256 * sizeof(int));
  float h[256];
  cudaMemset(d, 0, sizeof h);
  dyn<<<1, 256, 49152>>>(d, 12288);
  CHECK(cudaGetLastError());
  dyn<<<1, 256, 49156>>>(d, 12289);
  CHECK(cudaGetLastError());
  cudaFuncAttributes a;
  cudaFuncGetAttributes(&a, mixed);
  printf("mixed %zu %d\n", a.sharedSizeBytes, a.maxDynamicSharedSizeBytes);
  mixed<<<1, 256, 48128>>>(d, 12032);
  CHECK(cudaGetLastError());
  mixed<<<1, 256, 48132>>>(d, 12033);
  CHECK(cudaGetLastError());
  CHECK(cudaFuncSetAttribute(mixed, cudaFuncAttributeMaxDynamicSharedMemorySize, 163 * 1024 - 1024 + 4));
  CHECK(cudaFuncSetAttribute(mixed, cudaFuncAttributeMaxDynamicSharedMemorySize, 163 * 1024 - 1024));
  cudaFuncGetAttributes(&a, mixed);
  printf("mixed %zu %d\n", a.sharedSizeBytes, a.maxDynamicSharedSizeBytes);
  mixed<<<1, 256, 163 * 1024 - 1024>>>(d, (163 * 1024 - 1024) / 4);
  CHECK(cudaGetLastError());
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("mixed out %g %g\n", h[0], h[255]);
  // a loop of launches (one parallel region): the error is recorded, nothing runs
  cudaMemset(d, 0, sizeof h);
  for (int it = 0; it < 3; it++) dyn<<<1, 256, 65536>>>(d, 16384);
  CHECK(cudaGetLastError());
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("untouched %g %g\n", h[0], h[255]);
  CHECK(cudaFuncSetAttribute((const void*)dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  for (int it = 0; it < 3; it++) dyn<<<1, 256, 65536>>>(d, 16384);
  CHECK(cudaGetLastError());
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("dyn out %g %g\n", h[0], h[255]);
  tdyn<3><<<1, 64, 60000>>>(di);
  CHECK(cudaGetLastError());
  CHECK(cudaFuncSetAttribute(tdyn<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 60000));
  CHECK(cudaFuncSetAttribute(tdyn<3>, cudaFuncAttributePreferredSharedMemoryCarveout, 101));
  CHECK(cudaFuncSetAttribute(tdyn<3>, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  tdyn<3><<<1, 64, 60000>>>(di);
  CHECK(cudaGetLastError());
  int hi[64];
  cudaMemcpy(hi, di, sizeof hi, cudaMemcpyDeviceToHost);
  printf("tdyn out %d %d\n", hi[0], hi[63]);
  CHECK(cudaFuncSetAttribute((const void*)&main, cudaFuncAttributeMaxDynamicSharedMemorySize, 100));
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  printf("props %zu %zu\n", p.sharedMemPerBlock, p.sharedMemPerBlockOptin);
  CHECK(cudaDeviceSynchronize());
  return 0;
}
"""

EXPECTED = """\
cudaGetLastError(): cudaSuccess
cudaGetLastError(): cudaErrorInvalidValue
mixed 1024 48128
cudaGetLastError(): cudaSuccess
cudaGetLastError(): cudaErrorInvalidValue
cudaFuncSetAttribute(mixed, cudaFuncAttributeMaxDynamicSharedMemorySize, 163 * 1024 - 1024 + 4): cudaErrorInvalidValue
cudaFuncSetAttribute(mixed, cudaFuncAttributeMaxDynamicSharedMemorySize, 163 * 1024 - 1024): cudaSuccess
mixed 1024 165888
cudaGetLastError(): cudaSuccess
mixed out 256 1
cudaGetLastError(): cudaErrorInvalidValue
untouched 0 0
cudaFuncSetAttribute((const void*)dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536): cudaSuccess
cudaGetLastError(): cudaSuccess
dyn out DYN
cudaGetLastError(): cudaErrorInvalidValue
cudaFuncSetAttribute(tdyn<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 60000): cudaSuccess
cudaFuncSetAttribute(tdyn<3>, cudaFuncAttributePreferredSharedMemoryCarveout, 101): cudaErrorInvalidValue
cudaFuncSetAttribute(tdyn<3>, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared): \
cudaSuccess
cudaGetLastError(): cudaSuccess
tdyn out 189 0
cudaFuncSetAttribute((const void*)&main, cudaFuncAttributeMaxDynamicSharedMemorySize, 100): \
cudaErrorInvalidDeviceFunction
props 49152 166912
cudaDeviceSynchronize(): cudaSuccess
"""


def _dyn_sums() -> tuple[float, float]:
    """What ``dyn`` stores at threads 0 and 255 with n = 16384 and 256 threads (float sums in the
    kernel's order, exact here: every partial sum is a multiple of 0.5 below 2^23)."""
    n = 16384
    sums = []
    for t in (0, 255):
        acc = 0.0
        for i in range(t, n, 256):
            acc += (n - 1 - i) * 0.5
        sums.append(acc)
    return sums[0], sums[1]


@pytest.mark.parametrize("emulate", [False, True])
def test_dynamic_shared_memory_limits(tmp_path, emulate):
    need_compiler(cpp=True)
    src = tmp_path / "limits.cu"
    src.write_text(LIMITS)
    command = [sys.executable, "-m", "polypy.driver.cli", "run", *(["--emulate"] if emulate else []), str(src)]
    run = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr
    first, last = _dyn_sums()
    assert run.stdout == EXPECTED.replace("DYN", f"{first:g} {last:g}")
