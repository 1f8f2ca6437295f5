// Extended lambdas passed to host function templates that launch ("parallel_for" wrappers).
#include <cstdio>

struct Square {   // a function object through the same wrapper
  float* z;
  __device__ void operator()(int i) const { z[i] = z[i] * z[i]; }
};
template <class F> __global__ void for_each_kernel(int n, F f);   // defined after the first wrapper

template <class F> void parallel_for(int n, F f) {
  for_each_kernel<<<(n + 255) / 256, 256>>>(n, f);
  cudaDeviceSynchronize();
}
template <class F> __global__ void for_each_kernel(int n, F f) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) f(i);
}
template <class F> void shaped_for(int grid, int block, int n, F&& f) {   // a forwarding reference
  for_each_kernel<<<grid, block>>>(n, f);
}
template <class F> void by_ref_for(int n, const F& f) { shaped_for(3, 8, n, f); }   // passed on
struct Exec {   // a member function template that launches
  int block;
  template <class F> void run(int n, const F& f) const {
    for_each_kernel<<<(n + block - 1) / block, block>>>(n, f);
  }
};
template <class F> void late_for(int n, F f);   // defined after main
template <class T, class F> __global__ void map(int n, T* d, F f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = f(d[i]);
}
template <class T, class F> void transform(int n, T* d, F f) {   // explicit template arguments
  map<T, F><<<(n + 7) / 8, 8>>>(n, d, f);
}
struct Params { float scale; int shift; };   // declared after the wrappers

static void show(const char* name, const float* d, int n) {
  float h[64];
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  printf("%s", name);
  for (int i = 0; i < n; ++i) printf(" %.9g", h[i]);
  printf("\n");
}

int main() {
  const int n = 37;
  float hx[n];
  for (int i = 0; i < n; ++i) hx[i] = 0.5f * (float)(i - 10);
  float *x, *y, *z;
  cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float)); cudaMalloc(&z, n * sizeof(float));
  cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice);
  float a = 2.0f;
  parallel_for(n, [=] __device__ (int i) { y[i] = a * x[i] + 1.0f; });   // several lambdas, one template
  show("axpy", y, n);
  parallel_for(n, [=] __device__ (int i) { z[i] = y[i] * y[i]; });
  show("square", z, n);
  parallel_for(n, Square{z});
  show("functor", z, n);
  Params p = {0.25f, 7};
  auto g = [=] __host__ __device__ (int i) { y[i] = p.scale * (float)(i + p.shift); };
  shaped_for(2, 16, n, g);                     // a stored lambda: F is a reference to its closure
  show("params", y, n);
  shaped_for(5, 4, n, [=] __device__ (int i) { z[i] = x[i] - a; });   // F is the closure
  show("shaped", z, n);
  by_ref_for(n, [=] __device__ (int i) { y[i] = x[i] * x[i] * a; });
  show("byref", y, n);
  Exec e{8};
  e.run(n, [=] __device__ (int i) { z[i] = (float)i * a; });
  show("member", z, n);
  late_for(n, [=] __device__ (int i) { y[i] = -x[i]; });
  show("late", y, n);
  transform(n, z, [=] __host__ __device__ (float v) { return v * a - 1.0f; });   // held by polypy_close
  show("transform", z, n);
  cudaFree(x); cudaFree(y); cudaFree(z);
  return 0;
}

template <class F> void late_for(int n, F f) { for_each_kernel<<<4, 4>>>(n, f); }
