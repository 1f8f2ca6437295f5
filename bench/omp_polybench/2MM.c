/* 2MM: tmp = alpha A B, then D = beta D + tmp C, PolyBench/GPU's serial version (two i, j, k nests,
 * each element's products added in increasing k) parallelized over rows. Output: D. */
#include "port.h"

#ifndef NI
#define NI 1024
#endif
#ifndef NJ
#define NJ 1024
#endif
#ifndef NK
#define NK 1024
#endif
#ifndef NL
#define NL 1024
#endif

int main(int argc, char **argv)
{
    const int ni = NI, nj = NJ, nk = NK, nl = NL;
    DATA_TYPE alpha = 32412, beta = 2123;
    DATA_TYPE *A = port_alloc((size_t)ni * nk), *B = port_alloc((size_t)nk * nj), *C = port_alloc((size_t)nl * nj);
    DATA_TYPE *D = port_alloc((size_t)ni * nl), *tmp = port_alloc((size_t)ni * nj);
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < nk; ++j)
            A[(size_t)i * nk + j] = ((DATA_TYPE)i * j) / NI;
    for (int i = 0; i < nk; ++i)
        for (int j = 0; j < nj; ++j)
            B[(size_t)i * nj + j] = ((DATA_TYPE)i * (j + 1)) / NJ;
    for (int i = 0; i < nl; ++i)
        for (int j = 0; j < nj; ++j)
            C[(size_t)i * nj + j] = ((DATA_TYPE)i * (j + 3)) / NL;
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < nl; ++j)
            D[(size_t)i * nl + j] = ((DATA_TYPE)i * (j + 2)) / NK;

    port_start();
#pragma omp parallel for
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < nj; ++j) {
            DATA_TYPE s = 0;
            for (int k = 0; k < nk; ++k)
                s += alpha * A[(size_t)i * nk + k] * B[(size_t)k * nj + j];
            tmp[(size_t)i * nj + j] = s;
        }
    /* C is NL x NJ and read as C[k][j] for k < NJ, j < NL, as the program does (square by default) */
#pragma omp parallel for
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < nl; ++j) {
            DATA_TYPE s = D[(size_t)i * nl + j] * beta;
            for (int k = 0; k < nj; ++k)
                s += tmp[(size_t)i * nj + k] * C[(size_t)k * nj + j];
            D[(size_t)i * nl + j] = s;
        }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, D, 2, ni, nl, 0);
    if (f)
        fclose(f);
    return 0;
}
