// One file of a multi-file program: a kernel and the extern "C" function that launches it. The
// program's main is in multifile_main.c, compiled separately and linked with this file's
// translation (as a Makefile builds .cu and .c objects and links them).
#include <cuda_runtime.h>

__global__ void axpb(float* x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + b;
}

extern "C" int axpb_on_device(float* host, float a, float b, int n) {
  float* d;
  if (cudaMalloc((void**)&d, n * sizeof(float)) != cudaSuccess) return 1;
  cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice);
  axpb<<<(n + 63) / 64, 64>>>(d, a, b, n);
  cudaMemcpy(host, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d);
  return cudaGetLastError() != cudaSuccess;
}
