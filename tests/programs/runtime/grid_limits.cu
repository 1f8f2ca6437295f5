// gridDim.x is at most 2^31 - 1 (issue 36): a larger grid runs nothing and is
// cudaErrorInvalidConfiguration, through <<<...>>>, cudaLaunchKernel and a created stream.
#include <cstdio>
#include <cstdlib>

__global__ void count(unsigned int* hits) { atomicAdd(hits, 1u); }

int main() {
  unsigned int* hits;
  cudaMalloc(&hits, sizeof(unsigned int));
  cudaMemset(hits, 0, sizeof(unsigned int));
  count<<<dim3(1u << 31), 32>>>(hits);
  cudaError_t a = cudaGetLastError();
  count<<<dim3(0xffffffffu, 1, 1), dim3(1)>>>(hits);
  cudaError_t b = cudaGetLastError();
  void* args[] = {&hits};
  cudaError_t c = cudaLaunchKernel((void*)count, dim3(1u << 31), dim3(64), args, 0, 0);
  cudaGetLastError();
  cudaStream_t s;
  cudaStreamCreate(&s);
  count<<<dim3(2147483648u), 1, 0, s>>>(hits);
  cudaError_t d = cudaGetLastError();
  cudaStreamSynchronize(s);
  count<<<dim3(3, 2), 4>>>(hits);  // a valid launch: 24 hits
  cudaError_t e = cudaGetLastError();
  unsigned int h = 0;
  cudaMemcpy(&h, hits, sizeof(h), cudaMemcpyDeviceToHost);
  printf("%s %s %s %s %s hits=%u\n", cudaGetErrorName(a), cudaGetErrorName(b), cudaGetErrorName(c),
         cudaGetErrorName(d), cudaGetErrorName(e), h);
  cudaStreamDestroy(s);
  cudaFree(hits);
  return h == 24 ? EXIT_SUCCESS : EXIT_FAILURE;
}
