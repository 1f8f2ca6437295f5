/* matmul_tiled: C (M x N) = A (M x K) * B (K x N), row-major (samples/matmul_tiled.cu).
 *
 *   void matmul_tiled_omp(const float *A, const float *B, float *C, int M, int N, int K);
 *
 * C is overwritten. The CPU form of a tiled matmul, in three levels:
 *
 *   parallel for (BM x BN block of C)        threads share out blocks of C
 *     for (k panel of BK)                     the BK x BN panel of B stays in L2
 *       for (RI x RJ tile of the block)       4 rows x 32 columns of C held in registers
 *         for (k in the panel)                (8 vector accumulators), each B vector loaded
 *           acc[r][:] += A[i+r][k] * B[k][:]  once and used for 4 rows
 *
 * Edges (fewer than RI rows or RJ columns left) take a plain row loop. Every element of C sums
 * its products in increasing k, as the CUDA kernel does.
 */
#define BM 64
#define BN 256
#define BK 256
#define RI 4
#define RJ 32

static inline int min_int(int a, int b) { return a < b ? a : b; }

/* C[i..i+RI)[j..j+RJ) += A[i..i+RI)[k0..k1) * B[k0..k1)[j..j+RJ), accumulating in registers. */
static inline void register_tile(const float *restrict A, const float *restrict B, float *restrict C,
                                 int N, int K, int i, int j, int k0, int k1)
{
    float acc[RI][RJ];
    for (int r = 0; r < RI; ++r) {
#pragma omp simd
        for (int c = 0; c < RJ; ++c)
            acc[r][c] = C[(long)(i + r) * N + j + c];
    }
    for (int k = k0; k < k1; ++k) {
        const float *restrict b = B + (long)k * N + j;
        for (int r = 0; r < RI; ++r) {
            float a = A[(long)(i + r) * K + k];
#pragma omp simd
            for (int c = 0; c < RJ; ++c)
                acc[r][c] += a * b[c];
        }
    }
    for (int r = 0; r < RI; ++r) {
#pragma omp simd
        for (int c = 0; c < RJ; ++c)
            C[(long)(i + r) * N + j + c] = acc[r][c];
    }
}

/* C[i][j0..j1) += A[i][k0..k1) * B[k0..k1)[j0..j1), one row at a time (the edges). */
static inline void row_strip(const float *restrict A, const float *restrict B, float *restrict C,
                             int N, int K, int i, int j0, int j1, int k0, int k1)
{
    float *restrict c = C + (long)i * N;
    for (int k = k0; k < k1; ++k) {
        float a = A[(long)i * K + k];
        const float *restrict b = B + (long)k * N;
#pragma omp simd
        for (int j = j0; j < j1; ++j)
            c[j] += a * b[j];
    }
}

void matmul_tiled_omp(const float *restrict A, const float *restrict B, float *restrict C,
                      int M, int N, int K)
{
#pragma omp parallel for collapse(2) schedule(static)
    for (int i0 = 0; i0 < M; i0 += BM) {
        for (int j0 = 0; j0 < N; j0 += BN) {
            int i1 = min_int(i0 + BM, M), j1 = min_int(j0 + BN, N);
            for (int i = i0; i < i1; ++i) {
#pragma omp simd
                for (int j = j0; j < j1; ++j)
                    C[(long)i * N + j] = 0.0f;
            }
            for (int k0 = 0; k0 < K; k0 += BK) {
                int k1 = min_int(k0 + BK, K);
                int i = i0;
                for (; i + RI <= i1; i += RI) {
                    int j = j0;
                    for (; j + RJ <= j1; j += RJ)
                        register_tile(A, B, C, N, K, i, j, k0, k1);
                    for (int r = 0; r < RI && j < j1; ++r)
                        row_strip(A, B, C, N, K, i + r, j, j1, k0, k1);
                }
                for (; i < i1; ++i)
                    row_strip(A, B, C, N, K, i, j0, j1, k0, k1);
            }
        }
    }
}
