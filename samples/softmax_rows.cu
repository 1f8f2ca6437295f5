// softmax_rows: y[r][c] = exp(x[r][c] - max_r) / sum_c' exp(x[r][c'] - max_r), for each row r of
// a rows x cols matrix; one block per row (grid = rows), threads stride over the columns.
// Exercises: two block reductions through one __shared__ buffer (max, then sum) with barriers
// inside the reduction loops, a barrier protecting the reuse of the buffer, row pointers formed
// by pointer arithmetic, fmax/exp on REAL. blockDim.x must be a power of two <= MAX_BLOCK.
#ifndef REAL
#define REAL float
#endif

#define MAX_BLOCK 256

__global__ void softmax_rows(const REAL* x, REAL* y, int cols)
{
    __shared__ REAL red[MAX_BLOCK];

    int tid = threadIdx.x;
    const REAL* xr = x + blockIdx.x * cols;
    REAL* yr = y + blockIdx.x * cols;

    // Row maximum (every thread starts from xr[0], so idle threads are harmless).
    REAL m = xr[0];
    for (int c = tid; c < cols; c += blockDim.x)
        m = fmax(m, xr[c]);
    red[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            red[tid] = fmax(red[tid], red[tid + s]);
        __syncthreads();
    }
    REAL row_max = red[0];
    __syncthreads();  // all threads have read red[0] before it is overwritten below

    // Sum of the shifted exponentials.
    REAL sum = 0;
    for (int c = tid; c < cols; c += blockDim.x)
        sum += exp(xr[c] - row_max);
    red[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            red[tid] += red[tid + s];
        __syncthreads();
    }
    REAL inv = (REAL)1 / red[0];

    for (int c = tid; c < cols; c += blockDim.x)
        yr[c] = exp(xr[c] - row_max) * inv;
}
