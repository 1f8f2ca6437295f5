/* spmv_csr: y = A x for an nrows-row CSR matrix (row_ptr, col_idx, vals) (samples/spmv_csr.cu).
 *
 *   void spmv_csr_omp(int nrows, const int *row_ptr, const int *col_idx, const float *vals,
 *                     const float *x, float *y);
 *
 * One row per iteration; rows differ in length, so rows are handed out dynamically in chunks.
 */
void spmv_csr_omp(int nrows, const int *restrict row_ptr, const int *restrict col_idx,
                  const float *restrict vals, const float *restrict x, float *restrict y)
{
#pragma omp parallel for schedule(dynamic, 512)
    for (int row = 0; row < nrows; ++row) {
        float dot = 0.0f;
        for (int k = row_ptr[row]; k < row_ptr[row + 1]; ++k)
            dot += vals[k] * x[col_idx[k]];
        y[row] = dot;
    }
}
