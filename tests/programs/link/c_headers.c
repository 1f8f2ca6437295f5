/* A C source (compiled as C: no CUDA mode) whose device code calls the C library's functions and
 * which includes the C library's headers, as leukocyte's .c files do: polypy's prelude declares
 * abs, sqrtf, expf, __expf ... too, and must agree with <stdlib.h> and <math.h> in any order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

__global__ void c_library_calls(const float* x, const int* k, float* y, int* m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = sqrtf(fabsf(v)) + expf(-v * v) + (float)fabs((double)v) * 0.5f + __expf(0.25f * v) + powf(fabsf(v), 1.5f);
    m[i] = abs(k[i]) + (int)llabs((long long)k[i] * 3);
  }
}
