// Thrust on memory from cudaMalloc, wrapped in a thrust::device_ptr (tests/test_thrust.py): the
// emulator sees it too (polypy's cudaMalloc registry), so `polypy run --emulate` runs it.
#include <cstdio>
#include <thrust/device_ptr.h>
#include <thrust/sort.h>
#include <thrust/reduce.h>
__global__ void neg(int* a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = -a[i] + 3 * i; }
int main() {
  const int n = 1000; int* d; cudaMalloc((void**)&d, n * sizeof(int));
  thrust::device_ptr<int> p(d);
  for (int i = 0; i < n; ++i) p[i] = (i * 37) % 1000;
  thrust::sort(p, p + n);
  neg<<<4, 256>>>(d, n);
  cudaDeviceSynchronize();
  long long s = thrust::reduce(p, p + n, 0LL);
  int h[3]; cudaMemcpy(h, d + 10, 3 * sizeof(int), cudaMemcpyDeviceToHost);
  printf("%lld %d %d %d\n", s, h[0], h[1], h[2]); cudaFree(d); return 0;
}
