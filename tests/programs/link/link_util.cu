/* Host code only, no kernel (like Rodinia's util/cuda/cuda.cu): translated alone it must keep its
 * functions and globals, and share the CUDA runtime's state (allocations, last error) with the
 * program's other objects. */
#include <stdio.h>
#include <cuda_runtime.h>
#include "util.h"

int util_calls = 0;
static int failures = 0;

int check_error(const char* where) {
  cudaError_t err = cudaGetLastError();
  util_calls++;
  if (err != cudaSuccess) {
    failures++;
    printf("error %d at %s: %s\n", failures, where, cudaGetErrorString(err));
    return 1;
  }
  return 0;
}

float* upload(const float* host, int n) {
  float* device = 0;
  cudaMalloc((void**)&device, n * sizeof(float));
  cudaMemcpy(device, host, n * sizeof(float), cudaMemcpyHostToDevice);
  util_calls++;
  return device;
}

void release(float* device) {
  cudaFree(device);  /* memory cudaMalloc'ed in another object: must be known here */
  check_error("release");
}
