// reduce_sum: *out += sum(in[0..n)).
// Exercises: shared-memory tree reduction with a barrier inside a loop whose trip count depends on
// blockDim.x (`s >>= 1`, unsigned), then one global atomicAdd per block by thread 0.
// blockDim.x must be a power of two <= MAX_BLOCK; *out must be zeroed before the launch.
#ifndef REAL
#define REAL float
#endif

#define MAX_BLOCK 256

__global__ void reduce_sum(const REAL* in, REAL* out, int n)
{
    __shared__ REAL sdata[MAX_BLOCK];

    unsigned tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? in[i] : (REAL)0;
    __syncthreads();

    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }

    if (tid == 0)
        atomicAdd(out, sdata[0]);
}
