// CRTP (a base class template calling its derived class through static_cast<Derived*>(this)),
// empty base classes holding only member functions, and __managed__ variables the host uses
// directly. Prints each launch's results; tests/test_crtp_managed.py checks them.
#include <cstdio>
#include <cuda_runtime.h>

template <class D> struct Op {
  __device__ float run(float x) { return static_cast<D*>(this)->step(x) + 1.0f; }
  __device__ float twice(float x) { D& d = static_cast<D&>(*this); return 2.0f * d.step(x); }
};
struct Scale : Op<Scale> { float k; __device__ float step(float x) const { return k * x; } };
struct Square : Op<Square> { __device__ float step(float x) const { return x * x; } };
struct Offset { __device__ float off(float v) const { return v - 0.5f; } };  // an empty policy base
struct Shifted : Offset { float s; };

template <class D> __device__ float both(Op<D>& op, float x) { return op.run(x) + static_cast<D&>(op).step(x); }

__managed__ float bias = 0.5f;
__managed__ int hits[64];
static __device__ int calls;

template <class F>
__global__ void apply(const float* x, float* y, int n, F f, Shifted sh) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = f.run(x[i]) + f.twice(x[i]) + both(f, x[i]) + sh.off(sh.s) + bias;
    hits[i] = i * 3 + 1;
    atomicAdd(&calls, 1);
  }
}
__global__ void read_calls(int* out) { *out = calls; }

template <class F> void launch(const char* name, F f, const float* dx, float* dy, float* hy, int n, int block) {
  Shifted sh; sh.s = 2.0f;
  for (int i = 0; i < n; ++i) hits[i] = -1;
  apply<<<(n + block - 1) / block, block>>>(dx, dy, n, f, sh);
  cudaDeviceSynchronize();
  cudaMemcpy(hy, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  printf("%s %d %g", name, n, bias);
  for (int i = 0; i < n; ++i) printf(" %g", hy[i]);
  printf("\nhits");
  for (int i = 0; i < n; ++i) printf(" %d", hits[i]);
  printf("\n");
}

int main() {
  const int N = 37;
  float hx[N], hy[N];
  for (int i = 0; i < N; ++i) hx[i] = 0.25f * (i - 10);
  float *dx, *dy;
  cudaMalloc(&dx, N * sizeof(float));
  cudaMalloc(&dy, N * sizeof(float));
  cudaMemcpy(dx, hx, N * sizeof(float), cudaMemcpyHostToDevice);
  int sizes[3] = {1, 37, 20}, blocks[3] = {1, 8, 32};
  for (int s = 0; s < 3; ++s) {
    bias = 0.5f + s;  // the host writes the managed variable; the next launch reads it
    Scale sc; sc.k = 3.0f;
    launch("scale", sc, dx, dy, hy, sizes[s], blocks[s]);
    launch("square", Square(), dx, dy, hy, sizes[s], blocks[s]);
  }
  int* dc; cudaMalloc(&dc, sizeof(int));
  read_calls<<<1, 1>>>(dc);
  int c; cudaMemcpy(&c, dc, sizeof(int), cudaMemcpyDeviceToHost);
  printf("calls %d\n", c);
  return 0;
}
