// half_axpy: y = a * x + y in half precision (IEEE binary16), each operation rounded to nearest
// even: the product, then the sum (__hmul, then operator+), and the pair form on __half2.
#include <cuda_fp16.h>

__global__ void half_axpy(int n, __half a, const __half* x, __half* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = __hmul(a, x[i]) + y[i];
  }
}
