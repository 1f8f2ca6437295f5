/* Plain C, compiled by the C compiler: calls the CUDA runtime API itself, as b+tree's main.c does
 * (with nvcc it links against libcudart; here against the translated files). */
#include <stdio.h>
#include <stddef.h>

int cudaSetDevice(int device);
int cudaMalloc(void** p, size_t size);
int cudaMemset(void* p, int value, size_t size);
int cudaFree(void* p);
int cudaGetLastError(void);

float* c_side_buffer(int n) {
  float* d = NULL;
  cudaSetDevice(0);
  cudaMalloc((void**)&d, n * sizeof(float));
  cudaMemset(d, 0, n * sizeof(float));
  return d;
}

void c_side_free(float* d) {
  int first = cudaFree(d);   /* 0: known to the translated files' runtime */
  int second = cudaFree(d);  /* freed twice: cudaErrorInvalidDevicePointer */
  printf("c free %d %d last %d\n", first, second, cudaGetLastError());
}
