/* jacobi2d: one out-of-place 5-point Jacobi sweep on an nx x ny grid, row-major with x fastest;
 * boundary points are copied (samples/jacobi2d.cu).
 *
 *   void jacobi2d_omp(const float *in, float *out, int nx, int ny);
 *
 * Threads share out rows; the interior of a row is one vectorized loop.
 */
#include <string.h>

void jacobi2d_omp(const float *restrict in, float *restrict out, int nx, int ny)
{
#pragma omp parallel for schedule(static)
    for (int y = 0; y < ny; ++y) {
        const float *restrict c = in + (long)y * nx;
        float *restrict o = out + (long)y * nx;
        if (y == 0 || y == ny - 1 || nx < 3) {
            memcpy(o, c, (size_t)nx * sizeof(float));
            continue;
        }
        const float *restrict up = c - nx;
        const float *restrict down = c + nx;
        o[0] = c[0];
#pragma omp simd
        for (int x = 1; x < nx - 1; ++x)
            o[x] = 0.25f * (c[x - 1] + c[x + 1] + up[x] + down[x]);
        o[nx - 1] = c[nx - 1];
    }
}
