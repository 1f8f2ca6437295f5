// Kernels that wait for the host (tests/test_streams.py): each holds its stream until the host
// stores to memory the kernel only reads, after issuing more work behind it.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void hold(volatile unsigned int* latch) {
  while (latch[0] < 1)
    ;
}
__global__ void hold_atomic(int* gate, int want) {
  while (atomicAdd(gate, 0) != want) {
  }
}
__global__ void scale(float* x, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * v + 1.0f;
}

int main() {
  const int n = 2048;
  unsigned int* latch;
  int* gate;
  float *d, *e, h[n], g[n];
  cudaMallocHost(&latch, sizeof(unsigned int));
  cudaMallocHost(&gate, sizeof(int));
  cudaMalloc(&d, n * sizeof(float));
  cudaMalloc(&e, n * sizeof(float));
  for (int i = 0; i < n; ++i) h[i] = (float)i;
  cudaStream_t s, t;
  cudaStreamCreate(&s);
  cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking);
  *gate = 0;
  for (int round = 1; round <= 3; ++round) {
    *latch = 0;
    hold<<<1, 1, 0, s>>>(latch);  // everything after it in s waits for the host's store
    cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, s);
    scale<<<n / 256, 256, 0, s>>>(d, n, 2.0f);
    cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s);
    hold_atomic<<<4, 32, 0, t>>>(gate, round);  // four blocks of 32 threads, each polling
    cudaMemcpyAsync(e, d, sizeof h, cudaMemcpyDeviceToDevice, t);
    cudaError_t held = cudaStreamQuery(s), held_t = cudaStreamQuery(t);
    *latch = 1;
    cudaError_t synced = cudaStreamSynchronize(s);
    *gate = round;
    cudaStreamSynchronize(t);
    cudaMemcpy(g, e, sizeof g, cudaMemcpyDeviceToHost);
    printf("round %d %s %s %s %g %g %g\n", round, cudaGetErrorName(held), cudaGetErrorName(held_t),
           cudaGetErrorName(synced), h[1], h[n - 1], g[n - 1]);
  }
  cudaStreamDestroy(s);
  cudaStreamDestroy(t);
  cudaFreeHost(latch);
  cudaFreeHost(gate);
  return 0;
}
