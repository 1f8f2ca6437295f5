// stencil1d: out[i] = sum_{k=-RADIUS..RADIUS} w[k + RADIUS] * in[i + k], with in taken as zero
// outside [0, n).
// Exercises: `extern __shared__` dynamic shared memory sized at launch
// ((blockDim.x + 2 * RADIUS) elements), halo loads by the first RADIUS threads of the block,
// one barrier, and an `if (g < n)` guard.
#ifndef REAL
#define REAL float
#endif

#define RADIUS 3

__global__ void stencil1d(const REAL* in, const REAL* w, REAL* out, int n)
{
    extern __shared__ REAL smem[];

    int g = blockIdx.x * blockDim.x + threadIdx.x;  // global element
    int l = threadIdx.x + RADIUS;                   // its slot in smem

    smem[l] = (g < n) ? in[g] : (REAL)0;
    if (threadIdx.x < RADIUS) {
        int left = g - RADIUS;
        int right = g + (int)blockDim.x;
        smem[l - RADIUS] = (left >= 0) ? in[left] : (REAL)0;
        smem[l + blockDim.x] = (right < n) ? in[right] : (REAL)0;
    }
    __syncthreads();

    if (g < n) {
        REAL acc = 0;
        for (int k = -RADIUS; k <= RADIUS; ++k)
            acc += w[k + RADIUS] * smem[l + k];
        out[g] = acc;
    }
}
