/* softmax_rows: y[r][c] = exp(x[r][c] - max_r) / sum_c' exp(x[r][c'] - max_r) for each row of a
 * rows x cols matrix (samples/softmax_rows.cu; there the grid size is `rows`).
 *
 *   void softmax_rows_omp(const float *x, float *y, int rows, int cols);
 *
 * One row per iteration of a parallel loop; the row max and the sum are SIMD reductions, and the
 * exponentials are stored in y on the way so that each is computed once.
 */
#include <math.h>

void softmax_rows_omp(const float *restrict x, float *restrict y, int rows, int cols)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) {
        const float *restrict xr = x + (long)r * cols;
        float *restrict yr = y + (long)r * cols;
        float m = xr[0];
#pragma omp simd reduction(max : m)
        for (int c = 0; c < cols; ++c)
            m = xr[c] > m ? xr[c] : m;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int c = 0; c < cols; ++c) {
            float e = expf(xr[c] - m);
            yr[c] = e;
            sum += e;
        }
        float inv = 1.0f / sum;
#pragma omp simd
        for (int c = 0; c < cols; ++c)
            yr[c] *= inv;
    }
}
