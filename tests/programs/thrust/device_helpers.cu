// Device functions that host text calls (frontend/host_called_device.py): Op::apply is host text
// (its struct is), so `twice` stays in the translated program; `lane` uses threadIdx and is only
// called from a class template host code never instantiates: dropped as before.
#include <cstdio>
__device__ float twice(float x) { return 2.0f * x; }
__device__ float lane(float x) { return x + threadIdx.x; }
struct Op {
  float b;
  __device__ float apply(float x) const { return twice(x) + b; }
};
template <class T> struct Lane {
  __device__ T at(T x) const { return lane(x); }
};
__global__ void k(float* a, Op op) { a[threadIdx.x] = op.apply(a[threadIdx.x]) + Lane<float>().at(0.0f); }
int main() {
  float* a;
  cudaMallocManaged((void**)&a, 32 * sizeof(float));
  for (int i = 0; i < 32; ++i) a[i] = (float)i;
  k<<<1, 32>>>(a, Op{1.0f});
  cudaDeviceSynchronize();
  printf("%g %g\n", a[5], a[31]);
  return 0;
}
