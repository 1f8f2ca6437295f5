// __constant__ records holding device pointers (Rodinia heartwall's params_unique): a pointer
// read from __constant__ memory is the allocation it points into, re-set between launches.
#include <cstdio>
#include <cstdlib>

struct Pair {
  float* src;   // read through
  int* hits;    // written through
  int n;
  float scale;
};

struct Slot {
  int first;
  float* data;  // one allocation per slot, or shared by two
  int* count;
};

__constant__ Pair d_pair;
__constant__ Slot d_slots[4];
__device__ Pair d_dev;  // the same in __device__ memory

__global__ void gather(float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < d_pair.n) {
    out[i] = d_pair.scale * d_pair.src[(7 * i) % d_pair.n];
    d_pair.hits[i] = d_pair.hits[i] + i + 1;
  }
}

__global__ void per_block() {
  const int b = blockIdx.x;
  float* row = &d_slots[b].data[d_slots[b].first];
  row[threadIdx.x] = row[threadIdx.x] * 2.0f + (float)b;
  if (threadIdx.x == 0) atomicAdd(d_slots[b].count, (int)blockDim.x);
}

__global__ void scale_dev() {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < d_dev.n) d_dev.src[i] = d_dev.src[i] * d_dev.scale + (float)d_dev.hits[i];
}

int main() {
  const int n = 200;
  float h_src[n], h_out[n];
  int h_hits[n];
  for (int i = 0; i < n; i++) { h_src[i] = (float)(i % 17) - 8.0f; h_hits[i] = 0; }
  float *d_src, *d_src2, *d_out;
  int* d_hits;
  cudaMalloc((void**)&d_src, n * sizeof(float));
  cudaMalloc((void**)&d_src2, n * sizeof(float));
  cudaMalloc((void**)&d_out, n * sizeof(float));
  cudaMalloc((void**)&d_hits, n * sizeof(int));
  cudaMemcpy(d_src, h_src, n * sizeof(float), cudaMemcpyHostToDevice);
  for (int i = 0; i < n; i++) h_src[i] = 0.5f * (float)i;
  cudaMemcpy(d_src2, h_src, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(d_hits, h_hits, n * sizeof(int), cudaMemcpyHostToDevice);

  Pair pair;
  pair.src = d_src; pair.hits = d_hits; pair.n = n; pair.scale = 1.5f;
  cudaMemcpyToSymbol(d_pair, &pair, sizeof(Pair));
  gather<<<(n + 63) / 64, 64>>>(d_out);
  cudaMemcpy(h_out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
  double sum1 = 0;
  for (int i = 0; i < n; i++) sum1 += h_out[i] * (i + 1);
  // re-set the symbol: another source allocation, and hits shifted into its middle
  pair.src = d_src2; pair.hits = d_hits + 50; pair.n = 150; pair.scale = -2.0f;
  cudaMemcpyToSymbol(d_pair, &pair, sizeof(Pair));
  gather<<<3, 64>>>(d_out);
  cudaMemcpy(h_out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(h_hits, d_hits, n * sizeof(int), cudaMemcpyDeviceToHost);
  double sum2 = 0;
  long hits = 0;
  for (int i = 0; i < 150; i++) sum2 += h_out[i] * (i + 1);
  for (int i = 0; i < n; i++) hits += (long)h_hits[i] * (i + 3);
  printf("gather %.3f %.3f hits %ld\n", sum1, sum2, hits);

  // an array of records indexed by blockIdx: slots 0 and 2 share an allocation
  float *a, *b, *c;
  int* counts;
  cudaMalloc((void**)&a, 64 * sizeof(float));
  cudaMalloc((void**)&b, 32 * sizeof(float));
  cudaMalloc((void**)&c, 48 * sizeof(float));
  cudaMalloc((void**)&counts, 4 * sizeof(int));
  float h_a[64], h_b[32], h_c[48];
  for (int i = 0; i < 64; i++) h_a[i] = (float)i;
  for (int i = 0; i < 32; i++) h_b[i] = 100.0f + i;
  for (int i = 0; i < 48; i++) h_c[i] = -(float)i;
  int h_counts[4] = {0, 0, 0, 0};
  cudaMemcpy(a, h_a, sizeof(h_a), cudaMemcpyHostToDevice);
  cudaMemcpy(b, h_b, sizeof(h_b), cudaMemcpyHostToDevice);
  cudaMemcpy(c, h_c, sizeof(h_c), cudaMemcpyHostToDevice);
  cudaMemcpy(counts, h_counts, sizeof(h_counts), cudaMemcpyHostToDevice);
  Slot slots[4] = {{0, a, counts}, {8, b, counts + 1}, {32, a, counts + 2}, {16, c, counts + 3}};
  cudaMemcpyToSymbol(d_slots, slots, sizeof(slots));
  per_block<<<4, 16>>>();
  cudaMemcpy(h_a, a, sizeof(h_a), cudaMemcpyDeviceToHost);
  cudaMemcpy(h_b, b, sizeof(h_b), cudaMemcpyDeviceToHost);
  cudaMemcpy(h_c, c, sizeof(h_c), cudaMemcpyDeviceToHost);
  cudaMemcpy(h_counts, counts, sizeof(h_counts), cudaMemcpyDeviceToHost);
  double s = 0;
  for (int i = 0; i < 64; i++) s += h_a[i] * (i + 1);
  for (int i = 0; i < 32; i++) s += h_b[i] * (i + 2);
  for (int i = 0; i < 48; i++) s += h_c[i] * (i + 3);
  printf("slots %.1f counts %d %d %d %d\n", s, h_counts[0], h_counts[1], h_counts[2], h_counts[3]);
  // a __device__ record: b's 32 floats scaled, plus the counts
  Pair dev;
  dev.src = b; dev.hits = counts; dev.n = 4; dev.scale = 0.5f;
  cudaMemcpyToSymbol(d_dev, &dev, sizeof(Pair));
  scale_dev<<<1, 32>>>();
  cudaMemcpy(h_b, b, sizeof(h_b), cudaMemcpyDeviceToHost);
  printf("device %.2f %.2f %.2f %.2f %.2f\n", h_b[0], h_b[1], h_b[2], h_b[3], h_b[4]);
  cudaFree(d_src); cudaFree(d_src2); cudaFree(d_out); cudaFree(d_hits);
  cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(counts);
  return 0;
}
