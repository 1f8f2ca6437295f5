/* GEMVER: A += u1 v1^T + u2 v2^T, x += beta A^T y, x += z, w += alpha A x (N x N), PolyBench/GPU's
 * serial version, each of its four loop nests parallelized over its outer index i (the second
 * reads A by columns, as the serial version does). The initial values are the program's, integer
 * divisions included. Output: w. */
#include "port.h"

#ifndef N
#define N 4096
#endif

int main(int argc, char **argv)
{
    const int n = N;
    DATA_TYPE alpha = 43532, beta = 12313;
    DATA_TYPE *A = port_alloc((size_t)n * n), *u1 = port_alloc(n), *v1 = port_alloc(n), *u2 = port_alloc(n);
    DATA_TYPE *v2 = port_alloc(n), *w = port_alloc(n), *x = port_alloc(n), *y = port_alloc(n), *z = port_alloc(n);
    for (int i = 0; i < N; ++i) {
        u1[i] = i;
        u2[i] = (i + 1) / N / 2.0;
        v1[i] = (i + 1) / N / 4.0;
        v2[i] = (i + 1) / N / 6.0;
        y[i] = (i + 1) / N / 8.0;
        z[i] = (i + 1) / N / 9.0;
        x[i] = 0.0;
        w[i] = 0.0;
        for (int j = 0; j < N; ++j)
            A[(size_t)i * n + j] = ((DATA_TYPE)i * j) / N;
    }

    port_start();
#pragma omp parallel for
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            A[(size_t)i * n + j] = A[(size_t)i * n + j] + u1[i] * v1[j] + u2[i] * v2[j];
#pragma omp parallel for
    for (int i = 0; i < n; ++i) {
        DATA_TYPE s = x[i];
        for (int j = 0; j < n; ++j)
            s = s + beta * A[(size_t)j * n + i] * y[j];
        x[i] = s;
    }
#pragma omp parallel for
    for (int i = 0; i < n; ++i)
        x[i] = x[i] + z[i];
#pragma omp parallel for
    for (int i = 0; i < n; ++i) {
        DATA_TYPE s = w[i];
        for (int j = 0; j < n; ++j)
            s = s + alpha * A[(size_t)i * n + j] * x[j];
        w[i] = s;
    }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, w, 1, n, 0, 0);
    if (f)
        fclose(f);
    return 0;
}
