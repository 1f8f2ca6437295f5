/* COVAR: the covariance matrix of the M columns of an N-row data matrix (stored M x N, row stride
 * N), PolyBench/GPU's serial version: column means (parallel over columns), centring (parallel
 * over rows), then the upper triangle of the symmetric M x M matrix including its diagonal,
 * mirrored (parallel over its rows j1). Output: symmat. */
#include "port.h"

#ifndef M
#define M 2048
#endif
#ifndef N
#define N 2048
#endif
#define FLOAT_N 3214212.01

int main(int argc, char **argv)
{
    const int m = M, n = N;
    DATA_TYPE *data = port_alloc((size_t)M * N), *mean = port_alloc(M), *symmat = port_alloc((size_t)M * M);
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j)
            data[(size_t)i * N + j] = ((DATA_TYPE)i * j) / M;
#define d(i, j) data[(size_t)(i) * N + (j)]
    port_start();
#pragma omp parallel for
    for (int j = 0; j < m; ++j) {
        DATA_TYPE s = 0.0;
        for (int i = 0; i < n; ++i)
            s += d(i, j);
        mean[j] = s / FLOAT_N;
    }
#pragma omp parallel for
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < m; ++j)
            d(i, j) -= mean[j];
#pragma omp parallel for
    for (int j1 = 0; j1 < m; ++j1)
        for (int j2 = j1; j2 < m; ++j2) {
            DATA_TYPE s = 0.0;
            for (int i = 0; i < n; ++i)
                s += d(i, j1) * d(i, j2);
            symmat[(size_t)j1 * M + j2] = s;
            symmat[(size_t)j2 * M + j1] = s;
        }
    port_stop();
#undef d

    FILE *f = port_output(argc, argv);
    port_write(f, symmat, 2, M, M, 0);
    if (f)
        fclose(f);
    return 0;
}
