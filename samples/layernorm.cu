// layernorm: y[r][c] = (x[r][c] - mean_r) / sqrt(var_r + eps) * gamma[c] + beta[c] for each row r
// of a rows x cols matrix (biased variance); one block per row, threads stride over columns.
// Exercises: two block-wide sum reductions through __shared__ memory (mean, then variance of the
// centred values) with barriers inside loops, a broadcast of the result through shared memory,
// parameters (gamma, beta) shared by all rows, whose gradients are sums over all blocks.
// blockDim.x must be a power of two <= MAX_BLOCK.
#ifndef REAL
#define REAL float
#endif

#define MAX_BLOCK 256

__device__ REAL block_sum(REAL v, REAL* red)
{
    int tid = threadIdx.x;
    red[tid] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            red[tid] += red[tid + s];
        __syncthreads();
    }
    REAL total = red[0];
    __syncthreads();  // red may be reused by the caller's next reduction
    return total;
}

__global__ void layernorm(const REAL* x, const REAL* gamma, const REAL* beta, REAL* y, int cols, REAL eps)
{
    __shared__ REAL red[MAX_BLOCK];

    int row = blockIdx.x;
    int tid = threadIdx.x;

    REAL s = 0;
    for (int c = tid; c < cols; c += blockDim.x)
        s += x[row * cols + c];
    REAL mean = block_sum(s, red) / (REAL)cols;

    REAL q = 0;
    for (int c = tid; c < cols; c += blockDim.x) {
        REAL d = x[row * cols + c] - mean;
        q += d * d;
    }
    REAL var = block_sum(q, red) / (REAL)cols;
    REAL inv_std = (REAL)1 / sqrt(var + eps);

    for (int c = tid; c < cols; c += blockDim.x)
        y[row * cols + c] = (x[row * cols + c] - mean) * inv_std * gamma[c] + beta[c];
}
