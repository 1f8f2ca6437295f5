/* kmeans's style (CUDA before 5.0): cluster centres copied to __constant__ memory by the symbol's
 * NAME, cudaMemcpyToSymbol("c_centres", ...), the points read through a 1-D texture reference;
 * each point gets the index of its nearest centre. */
#include <stdio.h>
#include <cuda.h>

#define NFEATURES 2
#define NCENTRES 3

__constant__ float c_centres[NCENTRES * NFEATURES];
texture<float, 1, cudaReadModeElementType> t_points;

__global__ void nearest(int* membership, int npoints) {
  int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= npoints) return;
  int best = 0;
  float best_dist = 1e30f;
  for (int c = 0; c < NCENTRES; c++) {
    float dist = 0.0f;
    for (int f = 0; f < NFEATURES; f++) {
      float d = tex1Dfetch(t_points, p * NFEATURES + f) - c_centres[c * NFEATURES + f];
      dist += d * d;
    }
    if (dist < best_dist) { best_dist = dist; best = c; }
  }
  membership[p] = best;
}

int main(void) {
  const int npoints = 500;
  float points[500 * NFEATURES];
  float centres[NCENTRES * NFEATURES] = {0.0f, 0.0f, 10.0f, 0.0f, 0.0f, 10.0f};
  for (int i = 0; i < npoints; i++) {
    points[i * NFEATURES] = (float)((i * 7) % 13);
    points[i * NFEATURES + 1] = (float)((i * 5) % 11);
  }
  float* d_points;
  int* d_membership;
  cudaMalloc((void**)&d_points, sizeof points);
  cudaMalloc((void**)&d_membership, npoints * sizeof(int));
  cudaMemcpy(d_points, points, sizeof points, cudaMemcpyHostToDevice);
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  cudaBindTexture(NULL, &t_points, d_points, &desc, sizeof points);
  cudaMemcpyToSymbol("c_centres", centres, sizeof centres, 0, cudaMemcpyHostToDevice);
  nearest<<<(npoints + 127) / 128, 128>>>(d_membership, npoints);
  float back[NCENTRES * NFEATURES];
  cudaMemcpyFromSymbol(back, "c_centres", sizeof back);
  int membership[500];
  cudaMemcpy(membership, d_membership, sizeof membership, cudaMemcpyDeviceToHost);
  int counts[NCENTRES] = {0, 0, 0};
  long weighted = 0;
  for (int i = 0; i < npoints; i++) { counts[membership[i]]++; weighted += (long)i * membership[i]; }
  printf("counts %d %d %d weighted %ld centre %g %g\n", counts[0], counts[1], counts[2], weighted, back[2], back[5]);
  cudaUnbindTexture(t_points);
  cudaFree(d_points);
  cudaFree(d_membership);
  return 0;
}
