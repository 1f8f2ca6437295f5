/* JACOBI1D: TSTEPS steps of a 3-point average over the interior of A into B, then B copied back to
 * A (N points), PolyBench/GPU's serial version with both loops of a step parallelized. Output: A,
 * then B. */
#include "port.h"

#ifndef N
#define N 4096
#endif
#ifndef TSTEPS
#define TSTEPS 10000
#endif

int main(int argc, char **argv)
{
    const int n = N, tsteps = TSTEPS;
    DATA_TYPE *A = port_alloc(n), *B = port_alloc(n);
    for (int i = 0; i < n; ++i) {
        A[i] = ((DATA_TYPE)4 * i + 10) / N;
        B[i] = ((DATA_TYPE)7 * i + 11) / N;
    }

    port_start();
    for (int t = 0; t < tsteps; ++t) {
#pragma omp parallel for
        for (int i = 1; i < n - 1; ++i)
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1]);
#pragma omp parallel for
        for (int j = 1; j < n - 1; ++j)
            A[j] = B[j];
    }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, A, 1, n, 0, 0);
    port_write(f, B, 1, n, 0, 0);
    if (f)
        fclose(f);
    return 0;
}
