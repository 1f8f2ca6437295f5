/* gemm: C = alpha * A B + beta * C for ni x nk A and nk x nj B, with PolyBench's storage: rows of
 * A are NK long, rows of B and C NJ long, the loops run to ni, nj, nk (samples/gemm.cu).
 *
 *   void gemm_omp(int ni, int nj, int nk, float alpha, float beta, const float *a, const float *b,
 *                 float *c, int NK, int NJ);
 *
 * Rows of C are shared out among the threads; each row is scaled by beta, then gets
 * alpha * a[i][k] times row k of B added for k in increasing order (i-k-j: the inner loop runs
 * along rows of B and C, vectorized). Every element sums its products in increasing k, as the CUDA
 * kernel does, and multiplies as it does: (alpha * a[i][k]) * b[k][j].
 */
void gemm_omp(int ni, int nj, int nk, float alpha, float beta, const float *restrict a, const float *restrict b,
              float *restrict c, int NK, int NJ)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < ni; ++i) {
        float *restrict row = c + (long)i * NJ;
#pragma omp simd
        for (int j = 0; j < nj; ++j)
            row[j] *= beta;
        for (int k = 0; k < nk; ++k) {
            float s = alpha * a[(long)i * NK + k];
            const float *restrict bk = b + (long)k * NJ;
#pragma omp simd
            for (int j = 0; j < nj; ++j)
                row[j] += s * bk[j];
        }
    }
}
