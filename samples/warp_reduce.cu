// warp_reduce: *out += sum(in[0..n)).
// Exercises: warp shuffles (__shfl_down_sync with a full mask, offsets 16, 8, 4, 2, 1), lane and
// warp ids, per-warp partial sums in __shared__ memory, a final reduction by warp 0 and one
// global atomicAdd per block. blockDim.x must be a multiple of 32 (at most 1024); *out must be
// zeroed before the launch.
#ifndef REAL
#define REAL float
#endif

#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__global__ void warp_reduce(const REAL* in, REAL* out, int n)
{
    __shared__ REAL warp_sums[WARP_SIZE];

    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % WARP_SIZE;
    int warp = threadIdx.x / WARP_SIZE;

    REAL v = (i < n) ? in[i] : (REAL)0;
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        v += __shfl_down_sync(FULL_MASK, v, offset);
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();

    if (warp == 0) {
        int nwarps = blockDim.x / WARP_SIZE;
        v = (lane < nwarps) ? warp_sums[lane] : (REAL)0;
        for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
            v += __shfl_down_sync(FULL_MASK, v, offset);
        if (lane == 0)
            atomicAdd(out, v);
    }
}
