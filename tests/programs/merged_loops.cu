// Host loops of launches: merged into one parallel region or kept as separate launches (tests/test_merged_loops.py).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define N 1000
__global__ void step(const int* in, int* out, int n, int t) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (in[i] * 3 + in[(i + 1) % n] + t) % 1009;
}
__global__ void scale(float* x, int n, float alpha) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.5f + alpha;
}
__global__ void block_sum(const int* x, int* total, int n) {   // shared memory and an atomic per block
  __shared__ int part[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  part[threadIdx.x] = i < n ? x[i] : 0;
  __syncthreads();
  for (int s = 64; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, part[0]);
}
static long long checksum(const int* d) {
  int h[N];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  long long s = 0;
  for (int i = 0; i < N; i++) s = s * 31 % 1000000007 + h[i];
  return s;
}
static int* device_ints(int seed) {
  int h[N];
  for (int i = 0; i < N; i++) h[i] = (i * seed) % 1009;
  int* d;
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  return d;
}
long long swap_loop() {                    // merged: pointer swaps, a scalar argument
  int* a = device_ints(7);
  int* b = device_ints(0);
  int steps = 0;
  for (int t = 0; t < 50; t++) {
    step<<<(N + 127) / 128, 128>>>(a, b, N, t);
    int* tmp = a; a = b; b = tmp;
    steps += 2;
  }
  long long s = checksum(a) + steps;       // a, steps: the values after the loop
  cudaFree(a); cudaFree(b);
  return s;
}
long long scalar_loop() {                  // merged: scalar work between launches, a while loop, a break
  float h[N];
  for (int i = 0; i < N; i++) h[i] = (float)(i % 13);
  float* x;
  cudaMalloc(&x, sizeof h);
  cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
  float alpha = 1.0f;
  int k = 0;
  dim3 grid(8), block(128);
  while (k < 100) {
    alpha = alpha * 0.75f + (float)(k % 3);
    scale<<<grid, block>>>(x, N, alpha);
    if (alpha > 3.0f) grid.x = 8; else grid.x = 4;   // a dim3 member: half the array some steps
    k++;
    if (k == 40) break;
  }
  cudaMemcpy(h, x, sizeof h, cudaMemcpyDeviceToHost);
  double s = 0;
  for (int i = 0; i < N; i++) s += h[i] * (i + 1);
  cudaFree(x);
  return (long long)(s * 1000) + k * 100000000LL + (long long)(alpha * 1000);
}
long long shared_atomic_loop() {          // merged: a kernel with shared memory and an atomic
  int* x = device_ints(3);
  int* y = device_ints(0);
  int* total;
  cudaMalloc(&total, sizeof(int));
  cudaMemset(total, 0, sizeof(int));
  for (int r = 0; r < 30; r++) {
    block_sum<<<(N + 127) / 128, 128>>>(x, total, N);
    step<<<(N + 127) / 128, 128>>>(x, y, N, r);
    int* tmp = x; x = y; y = tmp;
  }
  int t;
  cudaMemcpy(&t, total, sizeof t, cudaMemcpyDeviceToHost);
  cudaFree(x); cudaFree(y); cudaFree(total);
  return t;
}
long long copy_in_loop() {                 // kept: a copy between launches
  int* a = device_ints(5);
  int* b = device_ints(0);
  int h[N];
  long long s = 0;
  for (int t = 0; t < 5; t++) {
    step<<<(N + 127) / 128, 128>>>(a, b, N, t);
    cudaMemcpy(h, b, sizeof h, cudaMemcpyDeviceToHost);
    s += h[t];
    int* tmp = a; a = b; b = tmp;
  }
  cudaFree(a); cudaFree(b);
  return s;
}
long long nested_loops() {                 // the outer loop prints: kept; the inner one merged
  int* a = device_ints(11);
  int* b = device_ints(0);
  for (int r = 0; r < 3; r++) {
    for (int t = 0; t < 4; t++) {
      step<<<(N + 127) / 128, 128>>>(a, b, N, t + r);
      step<<<(N + 127) / 128, 128>>>(b, a, N, t - r);
    }
    printf("round %d\n", r);
  }
  long long s = checksum(a);
  cudaFree(a); cudaFree(b);
  return s;
}
long long bad_launch_loop() {              // merged: an invalid launch records its error once
  int* a = device_ints(2);
  int* b = device_ints(0);
  int threads = 128;
  for (int t = 0; t < 6; t++) {
    step<<<(N + 127) / 128, threads>>>(a, b, N, t);
    threads = t == 2 ? 2048 : 128;   // the launch of t = 3 is invalid: it runs nothing
    int* tmp = a; a = b; b = tmp;
  }
  long long e = (long long)cudaGetLastError();
  return checksum(a) * 100 + e;
}
long long stream_loop() {                  // kept: a launch on a stream
  int* a = device_ints(5);
  int* b = device_ints(0);
  cudaStream_t s;
  cudaStreamCreate(&s);
  for (int t = 0; t < 4; t++) {
    step<<<(N + 127) / 128, 128, 0, s>>>(a, b, N, t);
    step<<<(N + 127) / 128, 128, 0, s>>>(b, a, N, t);
  }
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return checksum(a);
}
long long host_read_loop() {               // kept: the host reads memory between launches
  int* a = device_ints(5);
  int* b = device_ints(0);
  int* h = (int*)calloc(N, sizeof(int));
  long long s = 0;
  for (int t = 0; t < 4; t++) {
    step<<<(N + 127) / 128, 128>>>(a, b, N, t);
    s += h[0] * 0;
  }
  free(h);
  return s + checksum(b);
}
int main() {
  printf("%lld\n", swap_loop());
  printf("%lld\n", scalar_loop());
  printf("%lld\n", shared_atomic_loop());
  printf("%lld\n", copy_in_loop());
  printf("%lld\n", nested_loops());
  printf("%lld\n", bad_launch_loop());
  printf("%lld\n", stream_loop());
  printf("%lld\n", host_read_loop());
  return 0;
}
