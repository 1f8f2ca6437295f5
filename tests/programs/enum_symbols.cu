// Enumerations in a whole program: `enum class` and plain enums as __constant__/__device__
// arrays and scalars, record members and kernel parameters, read and written by a kernel.
#include <cstdio>
#include <cuda_runtime.h>

namespace cfg {
enum class Mode : unsigned char { Off, Half, Full };
}
enum Color { Red = 3, Green = 5, Blue = 9 };
struct Rule { cfg::Mode m; float w; Color c; };

__constant__ cfg::Mode table[5];
__constant__ Color one_color;
__device__ cfg::Mode dev_mode;
__device__ cfg::Mode seen[40];
__constant__ Rule rules[3];

__global__ void apply(const float *x, float *y, cfg::Mode m, const Color c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  cfg::Mode t = table[i % 5];
  const Rule &r = rules[i % 3];
  float v = x[i];
  if (t == cfg::Mode::Half) v *= 0.5f; else if (t == cfg::Mode::Off) v = 0;
  if (m == cfg::Mode::Full) v += 1;
  v += (int)c + (int)one_color + r.w * (r.m == cfg::Mode::Half ? 2 : 1) + (int)r.c;
  seen[i] = t == cfg::Mode::Full ? cfg::Mode::Off : cfg::Mode::Full;
  if (i == 0) dev_mode = cfg::Mode::Half;
  y[i] = v;
}

int main() {
  cfg::Mode h[5] = {cfg::Mode::Full, cfg::Mode::Half, cfg::Mode::Off, cfg::Mode::Half, cfg::Mode::Full};
  cudaMemcpyToSymbol(table, h, sizeof h);
  Color oc = Blue;
  cudaMemcpyToSymbol(one_color, &oc, sizeof oc);
  Rule rr[3] = {{cfg::Mode::Half, 1.5f, Red}, {cfg::Mode::Off, -2.f, Green}, {cfg::Mode::Full, 4.f, Blue}};
  cudaMemcpyToSymbol(rules, rr, sizeof rr);
  const int n = 40;
  float hx[n], hy[n];
  for (int i = 0; i < n; i++) hx[i] = (float)i;
  float *dx, *dy;
  cudaMalloc(&dx, sizeof hx);
  cudaMalloc(&dy, sizeof hy);
  cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice);
  apply<<<3, 16>>>(dx, dy, cfg::Mode::Full, Green, n);
  cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost);
  cfg::Mode dm, s[n];
  cudaMemcpyFromSymbol(&dm, dev_mode, sizeof dm);
  cudaMemcpyFromSymbol(s, seen, sizeof s);
  printf("dev_mode %d\n", (int)dm);
  for (int i = 0; i < n; i++) printf("%d %.2f %d\n", i, hy[i], (int)s[i]);
  cudaFree(dx);
  cudaFree(dy);
  return 0;
}
