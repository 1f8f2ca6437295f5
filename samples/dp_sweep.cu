// dp_sweep: minimum-cost top-to-bottom paths through a rows x cols cost table, one table per
// block (block b works on cost[b] and dp[b], each rows x cols, row-major):
//
//   dp[0][c] = cost[0][c]
//   dp[r][c] = cost[r][c] + min(dp[r-1][c-1], dp[r-1][c], dp[r-1][c+1])   (missing neighbours skipped)
//
// The block sweeps the rows in order; after each row it computes the row minimum with a shared
// atomicMin and stops early (`break`) once every path in the row costs more than `budget`.
// rows_done[b] receives the number of rows of dp[b] that were written; later rows are untouched.
//
// Exercises: a sequential loop with barriers inside it, a block-uniform `break` (the condition is
// read from shared memory after a barrier, so all threads see the same value), a barrier that
// keeps the reset of the shared minimum from racing with its readers, atomicMin on shared memory,
// columns strided over the threads (cols may exceed blockDim.x).
#define INT_INF 0x7fffffff

__global__ void dp_sweep(const int* cost, int* dp, int* rows_done, int rows, int cols, int budget)
{
    __shared__ int row_min;

    const int* ct = cost + blockIdx.x * rows * cols;
    int* dt = dp + blockIdx.x * rows * cols;

    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        dt[c] = ct[c];
    __syncthreads();

    int reached = rows;
    for (int r = 1; r < rows; ++r) {
        if (threadIdx.x == 0)
            row_min = INT_INF;
        __syncthreads();

        const int* prev = dt + (r - 1) * cols;
        int local_min = INT_INF;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            int best = prev[c];
            if (c > 0)
                best = min(best, prev[c - 1]);
            if (c + 1 < cols)
                best = min(best, prev[c + 1]);
            int v = ct[r * cols + c] + best;
            dt[r * cols + c] = v;
            local_min = min(local_min, v);
        }
        atomicMin(&row_min, local_min);
        __syncthreads();  // row r and row_min complete

        if (row_min > budget) {  // block-uniform
            reached = r + 1;
            break;
        }
        __syncthreads();  // everyone has read row_min before thread 0 resets it
    }

    if (threadIdx.x == 0)
        rows_done[blockIdx.x] = reached;
}
