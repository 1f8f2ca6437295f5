/* backprop_layerforward: partial_sums[s][col] = sum_{t < 16} input[16s + t] * weights[16s + t][col]
 * for every slab s < n_in / 16 and col < hid; weights is n_in x hid, row-major
 * (samples/backprop_layerforward.cu; there n_in = 16 * gridDim.y and hid = 16 * gridDim.x).
 *
 *   void backprop_layerforward_omp(const float *input, const float *weights, float *partial_sums,
 *                                  int n_in, int hid);
 *
 * hid must be a multiple of WIDTH (16), as the kernel's launch requires. Threads share out
 * slabs; a slab's 16 x WIDTH piece of the weights is reduced over its rows into WIDTH
 * accumulators that live in a vector register (no shared staging, no tree).
 */
#define WIDTH 16
#define HEIGHT 16

void backprop_layerforward_omp(const float *restrict input, const float *restrict weights,
                               float *restrict partial_sums, int n_in, int hid)
{
    int slabs = n_in / HEIGHT;
#pragma omp parallel for schedule(static)
    for (int s = 0; s < slabs; ++s) {
        const float *restrict x = input + (long)s * HEIGHT;
        for (int c0 = 0; c0 < hid; c0 += WIDTH) {
            const float *restrict w = weights + (long)s * HEIGHT * hid + c0;
            float acc[WIDTH] = {0};
            for (int t = 0; t < HEIGHT; ++t) {
#pragma omp simd
                for (int c = 0; c < WIDTH; ++c)
                    acc[c] += x[t] * w[(long)t * hid + c];
            }
#pragma omp simd
            for (int c = 0; c < WIDTH; ++c)
                partial_sums[(long)s * hid + c0 + c] = acc[c];
        }
    }
}
