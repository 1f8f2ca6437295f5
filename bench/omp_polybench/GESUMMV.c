/* GESUMMV: y = alpha A x + beta B x (N x N), PolyBench/GPU's serial version parallelized over rows
 * (each row's two sums in increasing j). Output: y. */
#include "port.h"

#ifndef N
#define N 4096
#endif

int main(int argc, char **argv)
{
    const int n = N;
    DATA_TYPE alpha = 43532, beta = 12313;
    DATA_TYPE *A = port_alloc((size_t)n * n), *B = port_alloc((size_t)n * n), *x = port_alloc(n), *y = port_alloc(n);
    for (int i = 0; i < n; ++i) {
        x[i] = ((DATA_TYPE)i) / N;
        for (int j = 0; j < n; ++j) {
            A[(size_t)i * n + j] = ((DATA_TYPE)i * j) / N;
            B[(size_t)i * n + j] = ((DATA_TYPE)i * j) / n;
        }
    }

    port_start();
#pragma omp parallel for
    for (int i = 0; i < n; ++i) {
        DATA_TYPE t = 0, s = 0;
        for (int j = 0; j < n; ++j) {
            t = A[(size_t)i * n + j] * x[j] + t;
            s = B[(size_t)i * n + j] * x[j] + s;
        }
        y[i] = alpha * t + beta * s;
    }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, y, 1, n, 0, 0);
    if (f)
        fclose(f);
    return 0;
}
