/* SYRK: C = alpha A A^T + beta C (C: NI x NI; A: NI x NJ), PolyBench/GPU's serial version (C scaled
 * by beta, then each element's products added in increasing k), both nests parallelized over
 * rows. Output: C. */
#include "port.h"

#ifndef NI
#define NI 1024
#endif
#ifndef NJ
#define NJ 1024
#endif

int main(int argc, char **argv)
{
    const int ni = NI, nj = NJ;
    DATA_TYPE alpha = 32412, beta = 2123;
    DATA_TYPE *A = port_alloc((size_t)ni * nj), *C = port_alloc((size_t)ni * ni);
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < nj; ++j)
            A[(size_t)i * nj + j] = ((DATA_TYPE)i * j) / ni;
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < ni; ++j)
            C[(size_t)i * ni + j] = ((DATA_TYPE)i * j) / ni;

    port_start();
#pragma omp parallel for
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < ni; ++j)
            C[(size_t)i * ni + j] *= beta;
#pragma omp parallel for
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < ni; ++j) {
            DATA_TYPE s = C[(size_t)i * ni + j];
            for (int k = 0; k < nj; ++k)
                s += alpha * A[(size_t)i * nj + k] * A[(size_t)j * nj + k];
            C[(size_t)i * ni + j] = s;
        }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, C, 2, ni, ni, 0);
    if (f)
        fclose(f);
    return 0;
}
