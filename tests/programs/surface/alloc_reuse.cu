// cudaMalloc/cudaFree in every iteration (Rodinia streamcluster's pgain does this): a freed block
// is reused by the next allocation of its size, holds what the program last wrote there (as
// device memory does), and freeing it twice is still an error. Large blocks start on a 2 MiB
// boundary (huge pages, where Linux gives them).
#include <cstdint>
#include <cstdio>

__global__ void fill(int* w, int n, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) w[i] = v + i % 3;
}

__global__ void total(const int* w, int n, int* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    int s = 0;
    for (int i = 0; i < n; i++) s += w[i];
    *out = s;
  }
}

int main() {
  int* out;
  cudaMalloc(&out, sizeof(int));
  void* first = 0;
  int reused = 0;
  for (int it = 0; it < 6; it++) {
    int n = (it % 2) ? 1000 : 40000;
    int* w;
    cudaMalloc(&w, n * sizeof(int));
    if (it == 0) first = w;
    else if (it % 2 == 0 && (void*)w == first) reused++;
    if (it == 4) {  // what iteration 2 left there
      total<<<1, 32>>>(w, n, out);
      int h;
      cudaMemcpy(&h, out, sizeof(int), cudaMemcpyDeviceToHost);
      printf("stale %d\n", h);
    }
    fill<<<(n + 255) / 256, 256>>>(w, n, it);
    total<<<1, 32>>>(w, n, out);
    int h;
    cudaMemcpy(&h, out, sizeof(int), cudaMemcpyDeviceToHost);
    printf("it %d sum %d\n", it, h);
    cudaFree(w);
  }
  printf("reused %d\n", reused);
  float* big;
  cudaMalloc(&big, 5 << 20);
  printf("big on a 2 MiB boundary %d\n", (int)((uintptr_t)big % (2u << 20) == 0));
  cudaFree(big);
  printf("double free %d\n", cudaFree(first) == cudaErrorInvalidDevicePointer);
  cudaGetLastError();
  cudaFree(out);
  cudaDeviceReset();
  return 0;
}
