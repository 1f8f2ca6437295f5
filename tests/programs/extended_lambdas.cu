// Extended lambdas (nvcc --extended-lambda): made in host code, passed to kernel templates.
#include <cstdio>

template <class F> __global__ void apply(int n, float* y, const float* x, F f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f(x[i]);
}
template <class F> __global__ void each(int n, F f) {   // a generic kernel: the lambda does the work
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) f(i);
}
template <class F> __global__ void with_shared(F f) { __shared__ float s[32]; f(s); }
template <class F> __device__ float once(const F& f, float v) { return f(v); }   // by reference
template <class F> __device__ float twice(F f, float v) { return once(f, once(f, v)); }
template <class F> __global__ void twice_kernel(int n, float* y, const float* x, F f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  F g = f;                                            // a copy of the closure
  if (i < n) y[i] = twice(g, x[i]);
}
__device__ float cube(float v) { return v * v * v; }
struct Params { float scale; int shift; };   // declared after the templates that take it

static void show(const char* name, const float* d, int n) {
  float h[64];
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  printf("%s", name);
  for (int i = 0; i < n; ++i) printf(" %.9g", h[i]);
  printf("\n");
}

int main() {
  const int n = 37;            // not captured: a constant the lambdas read as its value
  float hx[n];
  for (int i = 0; i < n; ++i) hx[i] = 0.5f * (float)(i - 10);
  float *x, *y, *z;
  cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float)); cudaMalloc(&z, n * sizeof(float));
  cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice);
  float a = 2.0f; int k = 3;

  // [=] __device__ written in the launch, calling a __device__ function; three launch shapes
  apply<<<(n + 31) / 32, 32>>>(n, y, x, [=] __device__ (float v) { return a * v + k + cube(v); });
  show("axpk32", y, n);
  apply<<<3, 16>>>(n, y, x, [=] __device__ (float v) { return a * v - (float)(k * n); });
  show("axmkn16", y, n);

  // [a, k] __host__ __device__, stored, changed before the launch (the copies are the old values)
  auto g = [a, k] __host__ __device__ (float v) { return a - v * (float)k; };
  a = 100.0f; k = -1;
  apply<<<1, 64>>>(n, y, x, g);
  show("stored", y, n);
  printf("host %.9g\n", g(1.0f));     // the host calls it too: 2 - 3

  // one generic kernel, several lambdas: a captured device pointer written, a captured struct
  Params p = {0.25f, 7};
  each<<<2, 8>>>(n, [=] __device__ (int i) { z[i] = p.scale * (float)(i + p.shift); });
  show("params", z, n);
  int base = 5;
  each<<<1, 32>>>(n, [=] __device__ (int i) { z[i] = x[i] * (float)base; });
  show("pointer", z, n);
  auto add = [=] __device__ (int i) { z[i] += (float)base * 0.5f; };
  for (int r = 0; r < 3; ++r) each<<<2, 16>>>(n, add);   // a host loop launching a stored lambda
  show("loop", z, n);
  apply<<<1, 64>>>(n, y, x, [] __device__ (float v) { return -v; });   // no captures
  show("negate", y, n);
  // mutable: each thread changes its own copy, calls after calls (thread t: i = t, t + 16, t + 32)
  each<<<2, 8>>>(n, [=] __device__ (int i) mutable { base += i; z[i] = (float)base; });
  show("mutable", z, n);

  // passed on to a __device__ function template; a generic lambda; a lambda made in the lambda
  float c = 1.5f;
  twice_kernel<<<(n + 7) / 8, 8>>>(n, y, x, [c] __device__ (float v) { return v * c + 1.0f; });
  show("twice", y, n);
  apply<<<2, 32>>>(n, y, x, [=] __device__ (auto v) { return v * v - c; });
  show("generic", y, n);
  each<<<4, 4>>>(n, [=] __device__ (int i) {
    auto sq = [&](float v) { return v * v * c; };
    y[i] = sq(x[i]) + (float)base;
  });
  show("nested", y, n);
  // shared memory and a barrier in the lambda's body: per block, the sum of x over its 32 threads
  with_shared<<<2, 32>>>([=] __device__ (float* s) {
    int i = blockIdx.x * 32 + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
      float t = 0.0f;
      for (int j = 0; j < 32; ++j) t += s[j];
      z[blockIdx.x] = t * c;
    }
  });
  show("blocks", z, 2);
  cudaFree(x); cudaFree(y); cudaFree(z);
  return 0;
}
