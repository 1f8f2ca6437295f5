/* What every PolyBench/GPU OpenMP port in this directory shares (issue 37).
 *
 * Each NAME.c is a whole program: it sets up the arrays as the PolyBench/GPU program NAME does
 * (same sizes, same -D size switches and defaults as its header, same float type, same row-major
 * layout, same initial values), runs the computation of the program's own serial CPU version with
 * `#pragma omp parallel for` on each nest's outer parallel loop, and prints
 *
 *     OpenMP port time in seconds: 0.123456
 *
 * (the computation only, as PolyBench times only its kernels). With a file name as its argument it
 * writes there what the CUDA program copies back from the device, in the same order: per array a
 * little-endian int32 rank, the int32 extents, then the float32 values (row-major).
 */
#ifndef POLYPY_BENCH_PORT_H
#define POLYPY_BENCH_PORT_H

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef DATA_TYPE
#define DATA_TYPE float
#endif

static double port_t0;

static inline DATA_TYPE *port_alloc(size_t n)
{
    DATA_TYPE *p = (DATA_TYPE *)calloc(n ? n : 1, sizeof(DATA_TYPE));
    if (!p) {
        fprintf(stderr, "port: cannot allocate %zu values\n", n);
        exit(2);
    }
    return p;
}

static inline void port_start(void) { port_t0 = omp_get_wtime(); }

static inline void port_stop(void)
{
    printf("OpenMP port time in seconds: %0.6f\n", omp_get_wtime() - port_t0);
}

static inline FILE *port_output(int argc, char **argv)
{
    if (argc < 2)
        return NULL;
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        fprintf(stderr, "port: cannot write %s\n", argv[1]);
        exit(2);
    }
    return f;
}

/* One array of rank `rank` (1 to 3) and extents d0, d1, d2 (those past the rank ignored). */
static inline void port_write(FILE *f, const DATA_TYPE *p, int rank, int d0, int d1, int d2)
{
    if (!f)
        return;
    int head[4] = {rank, d0, d1, d2};
    size_t n = (size_t)d0 * (rank > 1 ? (size_t)d1 : 1) * (rank > 2 ? (size_t)d2 : 1);
    float *buf = (float *)malloc(n * sizeof(float));
    for (size_t i = 0; i < n; ++i)
        buf[i] = (float)p[i];
    if (fwrite(head, sizeof(int), (size_t)rank + 1, f) != (size_t)rank + 1 || fwrite(buf, sizeof(float), n, f) != n) {
        fprintf(stderr, "port: write failed\n");
        exit(2);
    }
    free(buf);
}

#endif
