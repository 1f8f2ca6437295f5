/* histogram: bins[v] += number of i < n with data[i] == v, v in [0, 256) (samples/histogram.cu).
 *
 *   void histogram_omp(const unsigned char *data, unsigned int *bins, int n);
 *
 * Privatized, as on the GPU, but per thread rather than per block: each thread counts its share
 * of the input into NSUB private sub-histograms (consecutive equal bytes then hit different
 * counters, so increments do not wait on one another), then adds them into bins atomically.
 */
#include <string.h>

#define NBINS 256
#define NSUB 4

void histogram_omp(const unsigned char *restrict data, unsigned int *restrict bins, int n)
{
    int nquads = n / NSUB;
#pragma omp parallel
    {
        unsigned int local[NSUB][NBINS];
        memset(local, 0, sizeof local);
#pragma omp for schedule(static) nowait
        for (int q = 0; q < nquads; ++q) {
            const unsigned char *d = data + (long)q * NSUB;
            for (int s = 0; s < NSUB; ++s)
                local[s][d[s]]++;
        }
#pragma omp single nowait
        for (int i = nquads * NSUB; i < n; ++i)
            local[0][data[i]]++;
        for (int b = 0; b < NBINS; ++b) {
            unsigned int count = 0;
            for (int s = 0; s < NSUB; ++s)
                count += local[s][b];
            if (count != 0) {
#pragma omp atomic
                bins[b] += count;
            }
        }
    }
}
