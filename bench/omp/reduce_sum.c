/* reduce_sum: *out += sum(in[0..n)) (samples/reduce_sum.cu).
 *
 *   void reduce_sum_omp(const float *in, float *out, int n);
 *
 * The CUDA kernel sums 256-element blocks in shared memory and adds the block sums to *out with
 * atomics. The CPU form keeps the same two levels, which also keeps float rounding in check:
 * each CHUNK is summed with a vectorized reduction, and the chunk sums are reduced across
 * threads with an OpenMP reduction.
 */
#define CHUNK 4096

void reduce_sum_omp(const float *restrict in, float *restrict out, int n)
{
    float total = 0.0f;
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (int c0 = 0; c0 < n; c0 += CHUNK) {
        int c1 = c0 + CHUNK < n ? c0 + CHUNK : n;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int i = c0; i < c1; ++i)
            s += in[i];
        total += s;
    }
    *out += total;
}
