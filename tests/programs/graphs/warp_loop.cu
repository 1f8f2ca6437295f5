// A block sum whose last step is a loop of warp shuffles under `if (rank < 32)`, after a
// conditional step that reads and writes shared memory (the shape of simpleCudaGraphs'
// final reduction): the loop's counter is declared in the branch and only stepped there.
#include <cstdio>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__global__ void block_sum(const double* in, double* out, unsigned n) {
  __shared__ double part[256];
  cg::thread_block blk = cg::this_thread_block();
  double acc = 0.0;
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) acc += in[i];
  part[blk.thread_rank()] = acc;
  cg::sync(blk);
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(blk);
  if (blockDim.x >= 128 && blk.thread_rank() < 64) {
    part[blk.thread_rank()] = acc = acc + part[blk.thread_rank() + 64];
  }
  cg::sync(blk);
  if (blk.thread_rank() < 32) {
    if (blockDim.x >= 64) acc += part[blk.thread_rank() + 32];
    for (int step = warp.size() / 2; step > 0; step /= 2) acc += warp.shfl_down(acc, step);
  }
  if (blk.thread_rank() == 0) out[blockIdx.x] = acc;
}

int main() {
  const unsigned n = 1000;
  double h[n];
  for (unsigned i = 0; i < n; ++i) h[i] = 0.5 * i;
  double *d, *o, r[2];
  cudaMalloc(&d, n * sizeof(double));
  cudaMalloc(&o, 2 * sizeof(double));
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  block_sum<<<1, 64>>>(d, o, n);   // every element: 249750
  block_sum<<<1, 128>>>(d, o + 1, n);  // threads 0..63 and their partners 64..127: every element
  cudaMemcpy(r, o, sizeof r, cudaMemcpyDeviceToHost);
  printf("%.1f %.1f\n", r[0], r[1]);
  return 0;
}
