/* STREAM triad, a[i] = b[i] + s * c[i], on doubles (as in McCalpin's STREAM), with OpenMP.
 *
 *   double stream_triad_gbs(long n, int ntimes, double *best_seconds);
 *
 * Three arrays of n doubles (the default in the harness is n = 8Mi: 3 x 64 MiB, far beyond the
 * caches), first touched in parallel with the same static schedule as the timed loop, so each
 * thread's pages are local to it. Runs the triad ntimes and returns the best rate in GB/s
 * (1e9 bytes/s), counting 3 * 8 bytes per element (two loads and one store; the write-allocate
 * read of `a` is not counted, as in STREAM). Returns a negative value if allocation fails.
 *
 * Build standalone with -DSTREAM_MAIN for a command-line version: ./stream [n] [ntimes].
 */
#include <omp.h>
#include <stdlib.h>

double stream_triad_gbs(long n, int ntimes, double *best_seconds)
{
    double *a = aligned_alloc(64, ((size_t)n * sizeof(double) + 63) / 64 * 64);
    double *b = aligned_alloc(64, ((size_t)n * sizeof(double) + 63) / 64 * 64);
    double *c = aligned_alloc(64, ((size_t)n * sizeof(double) + 63) / 64 * 64);
    if (a == NULL || b == NULL || c == NULL) {
        free(a);
        free(b);
        free(c);
        return -1.0;
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) {
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }

    const double s = 3.0;
    double best = 1e30;
    for (int t = 0; t < ntimes; ++t) {
        double t0 = omp_get_wtime();
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; ++i)
            a[i] = b[i] + s * c[i];
        double dt = omp_get_wtime() - t0;
        if (dt < best)
            best = dt;
        /* keep the compiler from treating repeated triads as one */
        b[t % n] += a[(t * 7) % n] * 1e-300;
    }
    free(a);
    free(b);
    free(c);
    if (best_seconds != NULL)
        *best_seconds = best;
    return 3.0 * sizeof(double) * (double)n / best / 1e9;
}

#ifdef STREAM_MAIN
#include <stdio.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 8L << 20;
    int ntimes = argc > 2 ? atoi(argv[2]) : 20;
    double seconds = 0.0;
    double gbs = stream_triad_gbs(n, ntimes, &seconds);
    if (gbs < 0) {
        fprintf(stderr, "stream: cannot allocate 3 x %ld doubles\n", n);
        return 1;
    }
    printf("STREAM triad (double): n = %ld (3 x %.0f MiB), %d threads, best %.3f ms, %.1f GB/s\n",
           n, n * 8.0 / (1 << 20), omp_get_max_threads(), seconds * 1e3, gbs);
    return 0;
}
#endif
