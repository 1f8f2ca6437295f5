/* JACOBI2D: TSTEPS steps of a 5-point average over the interior of the N x N array A into B, then
 * B's interior copied back to A, PolyBench/GPU's serial version with both nests of a step
 * parallelized over rows. The program's .cu fixes N = 1000 and TSTEPS = 20 after its header (the
 * header's switches have no effect), and so does this port by default. Output: A, then B. */
#include "port.h"

#ifndef N
#define N 1000
#endif
#ifndef TSTEPS
#define TSTEPS 20
#endif

int main(int argc, char **argv)
{
    const int n = N, tsteps = TSTEPS;
    DATA_TYPE *A = port_alloc((size_t)n * n), *B = port_alloc((size_t)n * n);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            A[(size_t)i * n + j] = ((DATA_TYPE)i * (j + 2) + 10) / N;
            B[(size_t)i * n + j] = ((DATA_TYPE)(i - 4) * (j - 1) + 11) / N;
        }
#define a(i, j) A[(size_t)(i) * n + (j)]
#define b(i, j) B[(size_t)(i) * n + (j)]
    port_start();
    for (int t = 0; t < tsteps; ++t) {
#pragma omp parallel for
        for (int i = 1; i < n - 1; ++i)
            for (int j = 1; j < n - 1; ++j)
                b(i, j) = 0.2f * (a(i, j) + a(i, j - 1) + a(i, 1 + j) + a(1 + i, j) + a(i - 1, j));
#pragma omp parallel for
        for (int i = 1; i < n - 1; ++i)
            for (int j = 1; j < n - 1; ++j)
                a(i, j) = b(i, j);
    }
    port_stop();
#undef a
#undef b

    FILE *f = port_output(argc, argv);
    port_write(f, A, 2, n, n, 0);
    port_write(f, B, 2, n, n, 0);
    if (f)
        fclose(f);
    return 0;
}
