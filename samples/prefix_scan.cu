// prefix_scan: inclusive scan of each segment of blockDim.x elements (one block per segment):
// out[i] = sum of in[j] for j from the start of i's segment up to i; block_sums[b] = total of
// segment b (elements past n count as zero).
// Exercises: Hillis-Steele scan in __shared__ memory with two barriers per step inside the loop
// (read all, barrier, write all, barrier), guards for a partial last segment.
// blockDim.x must be <= MAX_BLOCK.
#ifndef REAL
#define REAL float
#endif

#define MAX_BLOCK 512

__global__ void prefix_scan(const REAL* in, REAL* out, REAL* block_sums, int n)
{
    __shared__ REAL s[MAX_BLOCK];

    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    s[tid] = (i < n) ? in[i] : (REAL)0;
    __syncthreads();

    for (int offset = 1; offset < blockDim.x; offset <<= 1) {
        REAL t = (tid >= offset) ? s[tid - offset] : (REAL)0;
        __syncthreads();  // all reads of this step happen before any write
        s[tid] += t;
        __syncthreads();
    }

    if (i < n)
        out[i] = s[tid];
    if (tid == blockDim.x - 1)
        block_sums[blockIdx.x] = s[tid];
}
