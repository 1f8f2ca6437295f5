// Unions in __constant__ and __device__ memory: a member read after a write through another is the
// bit reinterpretation of the bytes, as in shared and local memory (docs/typed_views.md).
#include <cstdio>
union FU { float f; unsigned int u; };
struct Item { int tag; union { float f; unsigned int u; } v; union { double d; unsigned long long w; int half[2]; } x; };
__constant__ FU c_fu[4];
__device__ Item d_items[64];
__global__ void k(const float* x, unsigned int* bits, unsigned int* words) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  bits[i] = c_fu[i % 4].u;
  d_items[i].tag = i;
  d_items[i].v.f = x[i];
  d_items[i].x.d = (double)x[i] * 0.5;
  words[2 * i] = d_items[i].v.u ^ (unsigned int)d_items[i].x.half[1];
  words[2 * i + 1] = (unsigned int)(d_items[i].x.w >> 20);
}
int main() {
  float h[64]; for (int i = 0; i < 64; i++) h[i] = (i - 20) * 0.37f;
  float fu[4] = {1.5f, -0.0f, 3.25e-5f, -7.0f};
  cudaMemcpyToSymbol(c_fu, fu, sizeof(fu));
  float* x; unsigned int *bits, *words;
  cudaMalloc((void**)&x, sizeof(h)); cudaMalloc((void**)&bits, 64 * 4); cudaMalloc((void**)&words, 128 * 4);
  cudaMemcpy(x, h, sizeof(h), cudaMemcpyHostToDevice);
  k<<<2, 32>>>(x, bits, words);
  unsigned int hb[64], hw[128];
  cudaMemcpy(hb, bits, sizeof(hb), cudaMemcpyDeviceToHost);
  cudaMemcpy(hw, words, sizeof(hw), cudaMemcpyDeviceToHost);
  Item items[64];
  cudaMemcpyFromSymbol(items, d_items, sizeof(items));
  unsigned long long s = 0;
  for (int i = 0; i < 64; i++) s = s * 31 + hb[i] + 7ull * hw[2 * i] + 13ull * hw[2 * i + 1] + (unsigned)items[i].tag + items[i].v.u + (items[i].x.w >> 7);
  printf("%llu %u %u %u\n", s, hb[1], hw[10], hw[11]);
  return 0;
}
