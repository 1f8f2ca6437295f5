/* stencil1d: out[i] = sum_{k=-R..R} w[k + R] * in[i + k], in taken as zero outside [0, n),
 * with R = 3 (samples/stencil1d.cu).
 *
 *   void stencil1d_omp(const float *in, const float *w, float *out, int n);
 *
 * No halo staging on a CPU: the interior runs without bounds tests (vectorized), the R points at
 * each end take the guarded path. Taps are summed in the kernel's order (k = -R .. R).
 */
#define R 3

static float point(const float *restrict in, const float *restrict w, int n, int i)
{
    float acc = 0.0f;
    for (int k = -R; k <= R; ++k) {
        int j = i + k;
        acc += w[k + R] * ((j >= 0 && j < n) ? in[j] : 0.0f);
    }
    return acc;
}

void stencil1d_omp(const float *restrict in, const float *restrict w, float *restrict out, int n)
{
    float wl[2 * R + 1];
    for (int k = 0; k < 2 * R + 1; ++k)
        wl[k] = w[k];
    int lo = R < n ? R : n;          /* [0, lo) and [hi, n) need guards */
    int hi = n - R > lo ? n - R : lo;

#pragma omp parallel for simd schedule(static)
    for (int i = lo; i < hi; ++i) {
        float acc = 0.0f;
        for (int k = -R; k <= R; ++k)
            acc += wl[k + R] * in[i + k];
        out[i] = acc;
    }
    for (int i = 0; i < lo; ++i)
        out[i] = point(in, wl, n, i);
    for (int i = hi; i < n; ++i)
        out[i] = point(in, wl, n, i);
}
