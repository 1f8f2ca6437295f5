/* GEMM: C = alpha A B + beta C (NI x NK times NK x NJ), PolyBench/GPU's serial version (i, j, k
 * loops, each C[i][j] scaled by beta, then its products added in increasing k) parallelized over
 * rows of C. Output: C. */
#include "port.h"

#ifndef NI
#define NI 512
#endif
#ifndef NJ
#define NJ 512
#endif
#ifndef NK
#define NK 512
#endif

int main(int argc, char **argv)
{
    const int ni = NI, nj = NJ, nk = NK;
    DATA_TYPE alpha = 32412, beta = 2123;
    DATA_TYPE *A = port_alloc((size_t)ni * nk), *B = port_alloc((size_t)nk * nj), *C = port_alloc((size_t)ni * nj);
    for (int i = 0; i < ni; ++i)
        for (int k = 0; k < nk; ++k)
            A[(size_t)i * nk + k] = ((DATA_TYPE)i * k) / NI;
    for (int k = 0; k < nk; ++k)
        for (int j = 0; j < nj; ++j)
            B[(size_t)k * nj + j] = ((DATA_TYPE)k * j) / NI;
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < nj; ++j)
            C[(size_t)i * nj + j] = ((DATA_TYPE)i * j) / NI;

    port_start();
#pragma omp parallel for
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < nj; ++j) {
            DATA_TYPE c = C[(size_t)i * nj + j] * beta;
            for (int k = 0; k < nk; ++k)
                c += alpha * A[(size_t)i * nk + k] * B[(size_t)k * nj + j];
            C[(size_t)i * nj + j] = c;
        }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, C, 2, ni, nj, 0);
    if (f)
        fclose(f);
    return 0;
}
