/* kmeans's kmeansPoint in small: the index of the nearest centre, set under an if inside a loop over
 * the centres (gpu2cpu kept it per thread across the interchanged loops, but did not load it back
 * where the write is conditional: every point not nearest to the last centre got centre 0). */
#include <stdio.h>
__global__ void nearest(const float* x, const float* c, int* out, int n, int nc, int nf) {
  int p = blockIdx.x * blockDim.x + threadIdx.x;
  int index = -1;
  if (p < n) {
    float best = 3.0e38f;
    for (int i = 0; i < nc; i++) {
      float ans = 0.0f;
      for (int j = 0; j < nf; j++) { float d = x[j * n + p] - c[i * nf + j]; ans += d * d; }
      if (ans < best) { best = ans; index = i; }
    }
  }
  if (p < n) out[p] = index;
}
int main() {
  const int n = 300, nc = 4, nf = 2;
  float x[n * nf], c[nc * nf] = {0, 0, 10, 0, 0, 10, 10, 10};
  for (int p = 0; p < n; p++) { x[p] = (p * 7) % 13; x[n + p] = (p * 5) % 11; }
  float *dx, *dc; int* dout; int out[n];
  cudaMalloc((void**)&dx, sizeof x); cudaMalloc((void**)&dc, sizeof c); cudaMalloc((void**)&dout, sizeof out);
  cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice); cudaMemcpy(dc, c, sizeof c, cudaMemcpyHostToDevice);
  nearest<<<(n + 127) / 128, 128>>>(dx, dc, dout, n, nc, nf);
  cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost);
  int counts[4] = {0, 0, 0, 0};
  long weighted = 0;
  for (int p = 0; p < n; p++) { counts[out[p]]++; weighted += (long)p * out[p]; }
  printf("counts %d %d %d %d weighted %ld\n", counts[0], counts[1], counts[2], counts[3], weighted);
  return 0;
}
