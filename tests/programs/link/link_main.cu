/* The main file of the link program: a kernel, launches, and calls of link_util.cu's host code. */
#include <stdio.h>
#include <cuda_runtime.h>
#include "util.h"

extern "C" float* c_side_buffer(int n);  /* link_host.c, plain C */
extern "C" void c_side_free(float* d);

__global__ void scale_shift(float* x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + b;
}

int main(void) {
  const int n = 1000;
  float h[1000];
  for (int i = 0; i < n; i++) h[i] = (float)(i % 17) - 4.0f;
  float* d = upload(h, n);
  scale_shift<<<(n + 127) / 128, 128>>>(d, 1.5f, 0.25f, n);
  check_error("scale_shift");
  scale_shift<<<1, 2048>>>(d, 2.0f, 0.0f, n);  /* too many threads: the launch fails, x is unchanged */
  check_error("oversized launch");
  float* extra;
  cudaMalloc((void**)&extra, 16);
  release(extra);   /* allocated here, freed by the other file */
  cudaFree(extra);  /* freed twice: an error this file makes, seen by the other file's check */
  check_error("double free");
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  release(d);
  float* z = c_side_buffer(n);  /* cudaMalloc'ed and zeroed by C code */
  scale_shift<<<(n + 255) / 256, 256>>>(z, 1.0f, 3.0f, n);
  float zh[1000];
  cudaMemcpy(zh, z, n * sizeof(float), cudaMemcpyDeviceToHost);
  c_side_free(z);
  double zsum = 0;
  for (int i = 0; i < n; i++) zsum += zh[i];
  printf("zsum %.1f\n", zsum);
  double sum = 0;
  for (int i = 0; i < n; i++) sum += h[i];
  printf("x[0] %.3f x[999] %.3f sum %.3f calls %d\n", h[0], h[999], sum, util_calls);
  return 0;
}
