// cuRAND's device API (XORWOW and Philox4_32_10): states made by one launch, kept in global
// memory, drawn from by later launches of other shapes. Prints raw draws ("bits"), uniforms
// ("unif", exact) and normals ("norm", within the ulps of log/sin/cos) of a few threads, the
// xor and sum of everything, and how many threads disagree between skipahead(n) and n draws.
#include <cstdio>
#include <curand_kernel.h>

#define N 70
#define DRAWS 12

__global__ void setup_xorwow(curandState* states, unsigned long long seed, int n) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid < n) curand_init(seed, tid, 7ull * tid, &states[tid]);
}

__global__ void draw_xorwow(curandState* states, unsigned int* bits, float* unif, double* unifd, float* norm,
                            double* normd, int n) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= n) return;
  curandState s = states[tid];
  bits[2 * tid] = curand(&s);
  bits[2 * tid + 1] = curand(&s);
  unif[tid] = curand_uniform(&s);
  unifd[tid] = curand_uniform_double(&s);
  norm[4 * tid] = curand_normal(&s);      // a new pair: its first value
  norm[4 * tid + 1] = curand_normal(&s);  // the pair's second, cached
  float2 p = curand_normal2(&s);
  norm[4 * tid + 2] = p.x + 0.0f * p.y;
  norm[4 * tid + 3] = curand_log_normal(&s, 0.5f, 0.25f);
  normd[2 * tid] = curand_normal_double(&s);
  normd[2 * tid + 1] = curand_normal_double(&s);
  states[tid] = s;
}

// skipahead(k) against k draws, skipahead_sequence(1) against the next subsequence's init.
__global__ void skip_xorwow(int* bad, unsigned long long seed, int n) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= n) return;
  curandState a, b, c;
  curand_init(seed, tid, 0, &a);
  curand_init(seed, tid, 0, &b);
  unsigned long long k = 37ull * tid + 3ull;
  skipahead(k, &a);
  for (unsigned long long i = 0; i < k; i++) curand(&b);
  int wrong = curand(&a) != curand(&b);
  curand_init(seed, tid + 1, 5, &c);
  curand_init(seed, tid, 0, &a);
  skipahead_sequence(1, &a);
  skipahead(5, &a);
  wrong += curand(&a) != curand(&c);
  bad[tid] = wrong;
}

__global__ void setup_philox(curandStatePhilox4_32_10_t* states, unsigned long long seed, int n) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid < n) curand_init(seed, tid, tid % 5, &states[tid]);
}

__global__ void draw_philox(curandStatePhilox4_32_10_t* states, unsigned int* bits, float* unif, double* unifd,
                            float* norm, double* normd, int n) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= n) return;
  curandStatePhilox4_32_10_t s = states[tid];
  bits[2 * tid] = curand(&s);
  uint4 q = curand4(&s);
  bits[2 * tid + 1] = q.x ^ q.y ^ q.z ^ q.w;
  float4 u4 = curand_uniform4(&s);
  unif[tid] = u4.x + u4.y + u4.z + u4.w;
  unifd[tid] = curand_uniform_double(&s);
  norm[4 * tid] = curand_normal(&s);
  norm[4 * tid + 1] = curand_normal(&s);
  float4 n4 = curand_normal4(&s);
  norm[4 * tid + 2] = n4.x - n4.w;
  norm[4 * tid + 3] = curand_log_normal(&s, -1.0f, 0.5f);
  normd[2 * tid] = curand_normal_double(&s);
  normd[2 * tid + 1] = curand_normal_double(&s);
  states[tid] = s;
}

__global__ void skip_philox(int* bad, unsigned long long seed, int n) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (tid >= n) return;
  curandStatePhilox4_32_10_t a, b;
  curand_init(seed, tid, 0, &a);
  curand_init(seed, tid, 0, &b);
  unsigned long long k = 13ull * tid + 1ull;
  skipahead(k, &a);
  for (unsigned long long i = 0; i < k; i++) curand(&b);
  bad[tid] = curand(&a) != curand(&b);
}

static const int SHOWN[5] = {0, 1, 31, 32, 69};

template <typename State>
static void run(const char* name, unsigned long long seed, bool philox) {
  State* states;
  unsigned int *bits;
  float *unif, *norm;
  double *unifd, *normd;
  int* bad;
  cudaMalloc(&states, N * sizeof(State));
  cudaMalloc(&bits, 2 * N * sizeof(unsigned int));
  cudaMalloc(&unif, N * sizeof(float));
  cudaMalloc(&unifd, N * sizeof(double));
  cudaMalloc(&norm, 4 * N * sizeof(float));
  cudaMalloc(&normd, 2 * N * sizeof(double));
  cudaMalloc(&bad, N * sizeof(int));
  unsigned int h_bits[2 * N];
  float h_unif[N], h_norm[4 * N];
  double h_unifd[N], h_normd[2 * N];
  int h_bad[N];
  if (philox) setup_philox<<<3, 32>>>((curandStatePhilox4_32_10_t*)states, seed, N);
  else setup_xorwow<<<3, 32>>>((curandState*)states, seed, N);
  const int grids[2] = {5, 1}, blocks[2] = {16, 128};
  for (int launch = 0; launch < 2; launch++) {
    if (philox) draw_philox<<<grids[launch], blocks[launch]>>>((curandStatePhilox4_32_10_t*)states, bits, unif, unifd,
                                                                 norm, normd, N);
    else draw_xorwow<<<grids[launch], blocks[launch]>>>((curandState*)states, bits, unif, unifd, norm, normd, N);
    cudaMemcpy(h_bits, bits, sizeof(h_bits), cudaMemcpyDeviceToHost);
    cudaMemcpy(h_unif, unif, sizeof(h_unif), cudaMemcpyDeviceToHost);
    cudaMemcpy(h_unifd, unifd, sizeof(h_unifd), cudaMemcpyDeviceToHost);
    cudaMemcpy(h_norm, norm, sizeof(h_norm), cudaMemcpyDeviceToHost);
    cudaMemcpy(h_normd, normd, sizeof(h_normd), cudaMemcpyDeviceToHost);
    unsigned int all = 0;
    double total = 0.0;
    for (int t = 0; t < N; t++) {
      all ^= h_bits[2 * t] ^ (h_bits[2 * t + 1] * 3u);
      total += h_unif[t] + h_unifd[t];
    }
    printf("%s launch %d: xor %08x sum %.17g\n", name, launch, all, total);
    for (int i = 0; i < 5; i++) {
      int t = SHOWN[i];
      printf("bits %d: %08x %08x\n", t, h_bits[2 * t], h_bits[2 * t + 1]);
      printf("unif %d: %a %a\n", t, h_unif[t], h_unifd[t]);
      printf("norm %d: %.8e %.8e %.8e %.8e %.16e %.16e\n", t, h_norm[4 * t], h_norm[4 * t + 1], h_norm[4 * t + 2],
             h_norm[4 * t + 3], h_normd[2 * t], h_normd[2 * t + 1]);
    }
  }
  if (philox) skip_philox<<<2, 64>>>(bad, seed, N);
  else skip_xorwow<<<2, 64>>>(bad, seed, N);
  cudaMemcpy(h_bad, bad, sizeof(h_bad), cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int t = 0; t < N; t++) wrong += h_bad[t];
  printf("%s skipahead mismatches: %d\n", name, wrong);
  cudaFree(states);
  cudaFree(bits);
  cudaFree(unif);
  cudaFree(unifd);
  cudaFree(norm);
  cudaFree(normd);
  cudaFree(bad);
}

int main() {
  run<curandState>("xorwow", 20261129ull, false);
  run<curandStatePhilox4_32_10_t>("philox", 0x0123456789abcdefull, true);
  return 0;
}
