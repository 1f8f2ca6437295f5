/* 2DCONV: a 3x3 convolution of an NI x NJ image (interior points only), PolyBench/GPU's serial
 * version parallelized over rows. Input: rand()/RAND_MAX, row by row, from the unseeded C library
 * generator (as the program draws it). Output: B (its interior is what the program compares). */
#include "port.h"

#ifndef NI
#define NI 4096
#endif
#ifndef NJ
#define NJ 4096
#endif

int main(int argc, char **argv)
{
    const int ni = NI, nj = NJ;
    DATA_TYPE *A = port_alloc((size_t)ni * nj), *B = port_alloc((size_t)ni * nj);
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < nj; ++j)
            A[(size_t)i * nj + j] = (float)rand() / RAND_MAX;

    const DATA_TYPE w00 = +0.2, w01 = -0.3, w02 = +0.4;  /* weight of A[i-1+a][j-1+b] is w_ba */
    const DATA_TYPE w10 = +0.5, w11 = +0.6, w12 = +0.7;
    const DATA_TYPE w20 = -0.8, w21 = -0.9, w22 = +0.10;
    port_start();
#pragma omp parallel for
    for (int i = 1; i < ni - 1; ++i)
        for (int j = 1; j < nj - 1; ++j) {
            const DATA_TYPE *up = A + (size_t)(i - 1) * nj, *mid = A + (size_t)i * nj, *down = A + (size_t)(i + 1) * nj;
            B[(size_t)i * nj + j] = w00 * up[j - 1] + w01 * mid[j - 1] + w02 * down[j - 1]
                                  + w10 * up[j] + w11 * mid[j] + w12 * down[j]
                                  + w20 * up[j + 1] + w21 * mid[j + 1] + w22 * down[j + 1];
        }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, B, 2, ni, nj, 0);
    if (f)
        fclose(f);
    return 0;
}
