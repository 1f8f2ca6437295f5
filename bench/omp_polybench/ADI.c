/* ADI: PolyBench/GPU's alternating-direction sweeps on N x N arrays, TSTEPS times: along each row
 * (forward elimination, then the last column, then back substitution; rows independent), then
 * along each column the same (columns independent). The serial version's loops, with `omp
 * parallel for` on the independent rows, and for the column sweeps on the columns (the sweep
 * index stays sequential outside). Output: B, then X. */
#include "port.h"

#ifndef N
#define N 1024
#endif
#ifndef TSTEPS
#define TSTEPS 1
#endif

int main(int argc, char **argv)
{
    const int n = N, tsteps = TSTEPS;
    DATA_TYPE *A = port_alloc((size_t)n * n), *B = port_alloc((size_t)n * n), *X = port_alloc((size_t)n * n);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            X[(size_t)i * n + j] = ((DATA_TYPE)i * (j + 1) + 1) / N;
            A[(size_t)i * n + j] = ((DATA_TYPE)(i - 1) * (j + 4) + 2) / N;
            B[(size_t)i * n + j] = ((DATA_TYPE)(i + 3) * (j + 7) + 3) / N;
        }
#define a(i, j) A[(size_t)(i) * n + (j)]
#define b(i, j) B[(size_t)(i) * n + (j)]
#define x(i, j) X[(size_t)(i) * n + (j)]
    port_start();
    for (int t = 0; t < tsteps; ++t) {
#pragma omp parallel for
        for (int i1 = 0; i1 < n; ++i1)
            for (int i2 = 1; i2 < n; ++i2) {
                x(i1, i2) = x(i1, i2) - x(i1, i2 - 1) * a(i1, i2) / b(i1, i2 - 1);
                b(i1, i2) = b(i1, i2) - a(i1, i2) * a(i1, i2) / b(i1, i2 - 1);
            }
#pragma omp parallel for
        for (int i1 = 0; i1 < n; ++i1)
            x(i1, N - 1) = x(i1, N - 1) / b(i1, N - 1);
#pragma omp parallel for
        for (int i1 = 0; i1 < n; ++i1)
            for (int i2 = 0; i2 < n - 2; ++i2)
                x(i1, N - i2 - 2) = (x(i1, N - 2 - i2) - x(i1, N - 2 - i2 - 1) * a(i1, N - i2 - 3)) / b(i1, N - 3 - i2);
        for (int i1 = 1; i1 < n; ++i1) {
#pragma omp parallel for
            for (int i2 = 0; i2 < n; ++i2) {
                x(i1, i2) = x(i1, i2) - x(i1 - 1, i2) * a(i1, i2) / b(i1 - 1, i2);
                b(i1, i2) = b(i1, i2) - a(i1, i2) * a(i1, i2) / b(i1 - 1, i2);
            }
        }
#pragma omp parallel for
        for (int i2 = 0; i2 < n; ++i2)
            x(N - 1, i2) = x(N - 1, i2) / b(N - 1, i2);
        for (int i1 = 0; i1 < n - 2; ++i1) {
#pragma omp parallel for
            for (int i2 = 0; i2 < n; ++i2)
                x(N - 2 - i1, i2) = (x(N - 2 - i1, i2) - x(N - i1 - 3, i2) * a(N - 3 - i1, i2)) / b(N - 2 - i1, i2);
        }
    }
    port_stop();
#undef a
#undef b
#undef x

    FILE *f = port_output(argc, argv);
    port_write(f, B, 2, n, n, 0);
    port_write(f, X, 2, n, n, 0);
    if (f)
        fclose(f);
    return 0;
}
