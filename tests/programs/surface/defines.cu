// -D and -I reach the host code as they reach the kernels: the host launches n / TILE blocks of
// TILE threads, and each block reverses its tile through shared memory sized TILE. Were the
// host to see another TILE than the kernel, elements would be left zero or reversed wrongly.
// The program's arguments (polypy run prog.cu -- ARGS) choose the length and a label.
#include <stdio.h>
#include <stdlib.h>
#include <cuda.h>
#include "tile_params.h"

__global__ void reverse_tiles(const int* in, int* out) {
  __shared__ int tile[TILE];
  int base = blockIdx.x * TILE;
  tile[threadIdx.x] = in[base + threadIdx.x];
  __syncthreads();
  out[base + threadIdx.x] = tile[TILE - 1 - threadIdx.x] + OFFSET;
}

int main(int argc, char** argv) {
  int tiles = argc > 1 ? atoi(argv[1]) : 4;
  int n = tiles * TILE;
  int* h = (int*)malloc(n * sizeof(int));
  for (int i = 0; i < n; i++) h[i] = i * 7 % 101;
  int *d_in, *d_out;
  cudaMalloc((void**)&d_in, n * sizeof(int));
  cudaMalloc((void**)&d_out, n * sizeof(int));
  cudaMemcpy(d_in, h, n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemset(d_out, 0, n * sizeof(int));
  reverse_tiles<<<n / TILE, TILE>>>(d_in, d_out);
  cudaMemcpy(h, d_out, n * sizeof(int), cudaMemcpyDeviceToHost);
  long sum = 0, weighted = 0;
  for (int i = 0; i < n; i++) {
    sum += h[i];
    weighted += (long)i * h[i];
  }
#ifdef OUTPUT
  printf("label %s\n", argc > 2 ? argv[2] : "none");
#endif
  printf("TILE %d n %d sum %ld weighted %ld\n", TILE, n, sum, weighted);
  free(h);
  return 0;
}
