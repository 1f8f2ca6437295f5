/* MVT: x1 += A y1 and x2 += A^T y2 (N x N), PolyBench/GPU's serial version, both loops
 * parallelized over i (the second reads A by columns, as the serial version does). Output: x1,
 * then x2. */
#include "port.h"

#ifndef N
#define N 4096
#endif

int main(int argc, char **argv)
{
    const int n = N;
    DATA_TYPE *a = port_alloc((size_t)n * n), *x1 = port_alloc(n), *x2 = port_alloc(n), *y1 = port_alloc(n);
    DATA_TYPE *y2 = port_alloc(n);
    for (int i = 0; i < n; ++i) {
        x1[i] = ((DATA_TYPE)i) / N;
        x2[i] = ((DATA_TYPE)i + 1) / N;
        y1[i] = ((DATA_TYPE)i + 3) / N;
        y2[i] = ((DATA_TYPE)i + 4) / N;
        for (int j = 0; j < n; ++j)
            a[(size_t)i * n + j] = ((DATA_TYPE)i * j) / N;
    }

    port_start();
#pragma omp parallel for
    for (int i = 0; i < n; ++i) {
        DATA_TYPE s = x1[i];
        for (int j = 0; j < N; ++j)
            s = s + a[(size_t)i * n + j] * y1[j];
        x1[i] = s;
    }
#pragma omp parallel for
    for (int i = 0; i < n; ++i) {
        DATA_TYPE s = x2[i];
        for (int j = 0; j < n; ++j)
            s = s + a[(size_t)j * n + i] * y2[j];
        x2[i] = s;
    }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, x1, 1, n, 0, 0);
    port_write(f, x2, 1, n, 0, 0);
    if (f)
        fclose(f);
    return 0;
}
