/* layernorm: y[r][c] = (x[r][c] - mean_r) / sqrt(var_r + eps) * gamma[c] + beta[c] for each row of a
 * rows x cols matrix, biased variance (samples/layernorm.cu; there rows = gridDim.x).
 *
 *   void layernorm_omp(const float *x, const float *gamma, const float *beta, float *y, int rows,
 *                      int cols, float eps);
 *
 * One row per iteration of a parallel loop: a SIMD sum for the mean, a SIMD sum of squared
 * deviations for the variance (two passes, as in the kernel; the row stays in cache), then the
 * vectorized affine map.
 */
#include <math.h>

void layernorm_omp(const float *restrict x, const float *restrict gamma, const float *restrict beta,
                   float *restrict y, int rows, int cols, float eps)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) {
        const float *restrict xr = x + (long)r * cols;
        float *restrict yr = y + (long)r * cols;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < cols; ++c)
            s += xr[c];
        float mean = s / (float)cols;
        float q = 0.0f;
#pragma omp simd reduction(+ : q)
        for (int c = 0; c < cols; ++c) {
            float d = xr[c] - mean;
            q += d * d;
        }
        float inv_std = 1.0f / sqrtf(q / (float)cols + eps);
#pragma omp simd
        for (int c = 0; c < cols; ++c)
            yr[c] = (xr[c] - mean) * inv_std * gamma[c] + beta[c];
    }
}
