// matmul_tiled: C (M x N) = A (M x K) * B (K x N), row-major, one thread per element of C.
// Exercises: two static __shared__ tiles, barriers inside the k-tile loop, bounds guards so that
// M, N and K need not be multiples of TILE (out-of-range tile entries are loaded as zero).
// Launch with block (TILE, TILE) and grid (ceil(N / TILE), ceil(M / TILE)).
#ifndef REAL
#define REAL float
#endif

#define TILE 16

__global__ void matmul_tiled(const REAL* A, const REAL* B, REAL* C, int M, int N, int K)
{
    __shared__ REAL As[TILE][TILE];
    __shared__ REAL Bs[TILE][TILE];

    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;

    REAL acc = 0;
    int ntiles = (K + TILE - 1) / TILE;
    for (int t = 0; t < ntiles; ++t) {
        int ka = t * TILE + tx;  // column of A this thread stages
        int kb = t * TILE + ty;  // row of B this thread stages
        As[ty][tx] = (row < M && ka < K) ? A[row * K + ka] : (REAL)0;
        Bs[ty][tx] = (kb < K && col < N) ? B[kb * N + col] : (REAL)0;
        __syncthreads();  // tiles complete before anyone reads them
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();  // everyone done reading before the next tile overwrites them
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}
