/* 3DCONV: PolyBench/GPU's 3-D stencil (interior points of an NI x NJ x NK grid, with the program's
 * own choice of taps and weights: several taps repeat, written here as the program's serial
 * version sums them, in the same order), parallelized over the outer index. Output: B (its
 * interior is what the program compares). */
#include "port.h"

#ifndef NI
#define NI 256
#endif
#ifndef NJ
#define NJ 256
#endif
#ifndef NK
#define NK 256
#endif

int main(int argc, char **argv)
{
    const int ni = NI, nj = NJ, nk = NK;
    const size_t sj = nk, si = (size_t)nj * nk;
    DATA_TYPE *A = port_alloc((size_t)ni * si), *B = port_alloc((size_t)ni * si);
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < nj; ++j)
            for (int k = 0; k < nk; ++k)
                A[i * si + j * sj + k] = i % 12 + 2 * (j % 7) + 3 * (k % 13);

    const DATA_TYPE c11 = +2, c21 = +5, c31 = -8, c12 = -3, c22 = +6, c32 = -9, c13 = +4, c23 = +7, c33 = +10;
    port_start();
#pragma omp parallel for
    for (int i = 1; i < ni - 1; ++i)
        for (int j = 1; j < nj - 1; ++j)
            for (int k = 1; k < nk - 1; ++k) {
#define AT(a, b, c) A[(size_t)(i + (a)) * si + (size_t)(j + (b)) * sj + (size_t)(k + (c))]
                B[i * si + j * sj + k] = c11 * AT(-1, -1, -1) + c13 * AT(1, -1, -1)
                                       + c21 * AT(-1, -1, -1) + c23 * AT(1, -1, -1)
                                       + c31 * AT(-1, -1, -1) + c33 * AT(1, -1, -1)
                                       + c12 * AT(0, -1, 0) + c22 * AT(0, 0, 0)
                                       + c32 * AT(0, 1, 0) + c11 * AT(-1, -1, 1)
                                       + c13 * AT(1, -1, 1) + c21 * AT(-1, 0, 1)
                                       + c23 * AT(1, 0, 1) + c31 * AT(-1, 1, 1)
                                       + c33 * AT(1, 1, 1);
#undef AT
            }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, B, 3, ni, nj, nk);
    if (f)
        fclose(f);
    return 0;
}
