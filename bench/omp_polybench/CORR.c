/* CORR: the correlation matrix of the M columns of an N-row data matrix (stored M x N, row stride
 * N, as the program declares it), PolyBench/GPU's serial version: column means and standard
 * deviations (parallel over columns), centring and scaling (parallel over rows), then the upper
 * triangle of the symmetric matrix, mirrored (parallel over its rows j1). Output: symmat. */
#include "port.h"

#ifndef M
#define M 2048
#endif
#ifndef N
#define N 2048
#endif
#define FLOAT_N 3214212.01f
#define EPS 0.005f

int main(int argc, char **argv)
{
    const int m = M, n = N;
    DATA_TYPE *data = port_alloc((size_t)M * N), *mean = port_alloc(M), *stddev = port_alloc(M);
    DATA_TYPE *symmat = port_alloc((size_t)M * N);
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
        mean[j] = s / (DATA_TYPE)FLOAT_N;
    }
#pragma omp parallel for
    for (int j = 0; j < m; ++j) {
        DATA_TYPE s = 0.0;
        for (int i = 0; i < n; ++i)
            s += (d(i, j) - mean[j]) * (d(i, j) - mean[j]);
        s /= FLOAT_N;
        s = sqrt(s);
        stddev[j] = s <= EPS ? 1.0 : s;
    }
#pragma omp parallel for
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < m; ++j) {
            d(i, j) -= mean[j];
            d(i, j) /= (sqrt(FLOAT_N) * stddev[j]);
        }
#pragma omp parallel for
    for (int j1 = 0; j1 < m - 1; ++j1) {
        symmat[(size_t)j1 * N + j1] = 1.0;
        for (int j2 = j1 + 1; j2 < m; ++j2) {
            DATA_TYPE s = 0.0;
            for (int i = 0; i < n; ++i)
                s += d(i, j1) * d(i, j2);
            symmat[(size_t)j1 * N + j2] = s;
            symmat[(size_t)j2 * N + j1] = s;
        }
    }
    symmat[(size_t)(M - 1) * N + (M - 1)] = 1.0;
    port_stop();
#undef d

    FILE *f = port_output(argc, argv);
    port_write(f, symmat, 2, M, N, 0);
    if (f)
        fclose(f);
    return 0;
}
