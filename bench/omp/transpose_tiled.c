/* transpose_tiled: out (cols x rows) = transpose of in (rows x cols) (samples/transpose_tiled.cu).
 *
 *   void transpose_tiled_omp(const float *in, float *out, int rows, int cols);
 *
 * Cache-blocked: each thread takes TB x TB tiles; within a tile both the reads of `in` and the
 * writes of `out` touch TB consecutive floats per row, so each cache line is used completely.
 * TB = 64 (a 16 KiB tile each way, 4 cache lines per tile row) measured best of 16/32/64/128.
 */
#define TB 64

void transpose_tiled_omp(const float *restrict in, float *restrict out, int rows, int cols)
{
#pragma omp parallel for collapse(2) schedule(static)
    for (int i0 = 0; i0 < rows; i0 += TB) {
        for (int j0 = 0; j0 < cols; j0 += TB) {
            int i1 = i0 + TB < rows ? i0 + TB : rows;
            int j1 = j0 + TB < cols ? j0 + TB : cols;
            for (int j = j0; j < j1; ++j) {
#pragma omp simd
                for (int i = i0; i < i1; ++i)
                    out[(long)j * rows + i] = in[(long)i * cols + j];
            }
        }
    }
}
