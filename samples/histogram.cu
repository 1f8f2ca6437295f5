// histogram: bins[v] += number of i < n with data[i] == v, for byte values v in [0, 256).
// Exercises: a per-block __shared__ histogram cleared and merged with block-stride loops,
// atomicAdd on shared memory, a grid-stride loop over the input, atomicAdd of unsigned int
// counts into global memory. bins must be zeroed (or hold earlier counts) before the launch.
#define NBINS 256

__global__ void histogram(const unsigned char* data, unsigned int* bins, int n)
{
    __shared__ unsigned int local[NBINS];

    for (int b = threadIdx.x; b < NBINS; b += blockDim.x)
        local[b] = 0;
    __syncthreads();

    int stride = blockDim.x * gridDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();

    for (int b = threadIdx.x; b < NBINS; b += blockDim.x)
        if (local[b] != 0)
            atomicAdd(&bins[b], local[b]);
}
