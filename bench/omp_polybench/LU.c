/* LU: in-place LU decomposition (no pivoting) of the N x N matrix A, PolyBench/GPU's serial
 * version: for each k in turn, row k right of the diagonal divided by the pivot (parallel over
 * columns), then the trailing block updated (parallel over rows). Output: A. */
#include "port.h"

#ifndef N
#define N 2048
#endif

int main(int argc, char **argv)
{
    const int n = N;
    DATA_TYPE *A = port_alloc((size_t)n * n);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            A[(size_t)i * n + j] = ((DATA_TYPE)i * j + 1) / N;
#define a(i, j) A[(size_t)(i) * n + (j)]
    port_start();
    for (int k = 0; k < n; ++k) {
#pragma omp parallel for
        for (int j = k + 1; j < n; ++j)
            a(k, j) = a(k, j) / a(k, k);
#pragma omp parallel for
        for (int i = k + 1; i < n; ++i)
            for (int j = k + 1; j < n; ++j)
                a(i, j) = a(i, j) - a(i, k) * a(k, j);
    }
    port_stop();
#undef a

    FILE *f = port_output(argc, argv);
    port_write(f, A, 2, n, n, 0);
    if (f)
        fclose(f);
    return 0;
}
