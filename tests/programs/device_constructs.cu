// Device-code constructs of real CUDA programs (issue 14): switch with fallthrough, the C++03
// launch spelling `k<< <g, b>> >`, launches inside host function templates, a counter reused by a
// later thread-dependent loop around a uniform __syncthreads loop, 1-D texture references,
// size_t loops, float4 views of float buffers, integer intrinsics.
// tests/test_device_constructs.py computes what it prints with NumPy.
#include <cstdio>
#include <cstdlib>

#define NT 64

texture<float, 1, cudaReadModeElementType> t_in;

__global__ void classify(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = x[i];
  int acc = 0;
  switch (v & 7) {
    case 0: acc = 10; break;
    case 1: case 2: acc += 1;
    default: acc = acc * 3 + 5; break;
    case 4: acc = 7;
    case 6: if (v > 50) break; acc += 2;
  }
  y[i] = acc;
}

template <int B, typename T>
__global__ void scale(T* x, T a, int n) {
  int i = blockIdx.x * B + threadIdx.x;
  if (i < n) x[i] *= a;
}

template <int B, typename T>
void run_scale(T* x, T a, int n) { scale<B, T><<<(n + B - 1) / B, B>>>(x, a, n); }

template <typename T>
void scale_all(T* x, int n) {
  if (n > 100) run_scale<128, T>(x, (T)2, n);
  else run_scale<32>(x, (T)3, n);
}

// Block sums as Rodinia's srad reduce computes them: `i` serves a uniform loop with a barrier,
// then a loop only the last thread runs.
__global__ void block_sums(float* sums, int n) {
  __shared__ float ps[NT];
  int tx = threadIdx.x, bx = blockIdx.x;
  int i;
  int ei = bx * NT + tx;
  ps[tx] = ei < n ? tex1Dfetch(t_in, ei) : 0.0f;
  __syncthreads();
  for (i = 2; i <= NT; i = 2 * i) {
    if ((tx + 1) % i == 0) ps[tx] = ps[tx] + ps[tx - i / 2];
    __syncthreads();
  }
  if (tx == NT - 1) {
    for (i = 0; i < 2; i++) ps[tx] += 0.0f * sums[bx];
    sums[bx] = ps[tx];
  }
}

__global__ void vectors(const float* x, float* y, unsigned* bits, size_t n4) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)blockDim.x * gridDim.x) {
    float4 a = reinterpret_cast<const float4*>(x)[i];
    reinterpret_cast<float4*>(y)[i] = make_float4(a.w, a.z + 1.0f, a.y * 2.0f, a.x);
    unsigned u = (unsigned)(i * 2654435761u);
    bits[i] = __popc(u) + 100u * __clz((int)u) + 10000u * __ffs((int)u) + __umul24(u, 3u);
  }
}

int main() {
  const int n = 300;
  int hx[n], hy[n];
  for (int i = 0; i < n; i++) hx[i] = (i * 37) % 101;
  int *dx, *dy;
  cudaMalloc(&dx, sizeof hx);
  cudaMalloc(&dy, sizeof hy);
  cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice);
  classify<< <(n + 63) / 64, 64>> >(dx, dy, n);
  cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost);
  long s = 0;
  for (int i = 0; i < n; i++) s += (long)hy[i] * (i % 7 + 1);
  printf("switch: %ld y[5] = %d\n", s, hy[5]);

  float hf[50];
  double hd[200];
  for (int i = 0; i < 50; i++) hf[i] = 0.5f * i;
  for (int i = 0; i < 200; i++) hd[i] = 0.25 * i;
  float* df;
  double* dd;
  cudaMalloc(&df, sizeof hf);
  cudaMalloc(&dd, sizeof hd);
  cudaMemcpy(df, hf, sizeof hf, cudaMemcpyHostToDevice);
  cudaMemcpy(dd, hd, sizeof hd, cudaMemcpyHostToDevice);
  scale_all(df, 50);
  scale_all<double>(dd, 200);
  run_scale<32, float>(df, 0.5f, 50);
  cudaMemcpy(hf, df, sizeof hf, cudaMemcpyDeviceToHost);
  cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost);
  printf("templates: %.2f %.2f\n", hf[49], hd[199]);

  const int m = 200, blocks = (m + NT - 1) / NT;
  float hin[m], hs[blocks];
  for (int i = 0; i < m; i++) hin[i] = (float)((i * 7) % 11) - 3.0f;
  float *din, *ds;
  cudaMalloc(&din, sizeof hin);
  cudaMalloc(&ds, sizeof hs);
  cudaMemcpy(din, hin, sizeof hin, cudaMemcpyHostToDevice);
  cudaMemset(ds, 0, sizeof hs);
  cudaBindTexture(0, t_in, din, sizeof hin);
  block_sums<<<blocks, NT>>>(ds, m);
  cudaUnbindTexture(t_in);
  cudaMemcpy(hs, ds, sizeof hs, cudaMemcpyDeviceToHost);
  printf("block sums: %.1f %.1f %.1f %.1f\n", hs[0], hs[1], hs[2], hs[3]);

  const size_t n4 = 100;
  float* hv = (float*)malloc(4 * n4 * sizeof(float));
  float* hw = (float*)malloc(4 * n4 * sizeof(float));
  unsigned* hb = (unsigned*)malloc(n4 * sizeof(unsigned));
  for (size_t i = 0; i < 4 * n4; i++) hv[i] = (float)(i % 9) * 0.5f;
  float *dv, *dw;
  unsigned* db;
  cudaMalloc(&dv, 4 * n4 * sizeof(float));
  cudaMalloc(&dw, 4 * n4 * sizeof(float));
  cudaMalloc(&db, n4 * sizeof(unsigned));
  cudaMemcpy(dv, hv, 4 * n4 * sizeof(float), cudaMemcpyHostToDevice);
  vectors<<<2, 32>>>(dv, dw, db, n4);
  cudaMemcpy(hw, dw, 4 * n4 * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(hb, db, n4 * sizeof(unsigned), cudaMemcpyDeviceToHost);
  double w = 0;
  unsigned long long b = 0;
  for (size_t i = 0; i < 4 * n4; i++) w += hw[i] * (double)(i % 5 + 1);
  for (size_t i = 0; i < n4; i++) b += hb[i] % 1000003u;
  printf("vectors: %.2f bits: %llu %u\n", w, b, hb[7]);
  return 0;
}
