/* 3MM: E = A B, F = C D, G = E F, PolyBench/GPU's serial version (three i, j, k nests, products
 * added in increasing k) parallelized over rows. Output: G. */
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
#ifndef NL
#define NL 512
#endif
#ifndef NM
#define NM 512
#endif

/* out (rows x cols) = a (rows x inner) b (inner x cols), all row-major */
static void matmul(int rows, int cols, int inner, const DATA_TYPE *a, const DATA_TYPE *b, DATA_TYPE *out)
{
#pragma omp parallel for
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j) {
            DATA_TYPE s = 0;
            for (int k = 0; k < inner; ++k)
                s += a[(size_t)i * inner + k] * b[(size_t)k * cols + j];
            out[(size_t)i * cols + j] = s;
        }
}

int main(int argc, char **argv)
{
    const int ni = NI, nj = NJ, nk = NK, nl = NL, nm = NM;
    DATA_TYPE *A = port_alloc((size_t)ni * nk), *B = port_alloc((size_t)nk * nj), *C = port_alloc((size_t)nj * nm);
    DATA_TYPE *D = port_alloc((size_t)nm * nl), *E = port_alloc((size_t)ni * nj), *F = port_alloc((size_t)nj * nl);
    DATA_TYPE *G = port_alloc((size_t)ni * nl);
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < nk; ++j)
            A[(size_t)i * nk + j] = ((DATA_TYPE)i * j) / ni;
    for (int i = 0; i < nk; ++i)
        for (int j = 0; j < nj; ++j)
            B[(size_t)i * nj + j] = ((DATA_TYPE)i * (j + 1)) / nj;
    for (int i = 0; i < nj; ++i)
        for (int j = 0; j < nm; ++j)
            C[(size_t)i * nm + j] = ((DATA_TYPE)i * (j + 3)) / nl;
    for (int i = 0; i < nm; ++i)
        for (int j = 0; j < nl; ++j)
            D[(size_t)i * nl + j] = ((DATA_TYPE)i * (j + 2)) / nk;

    port_start();
    matmul(ni, nj, nk, A, B, E);
    matmul(nj, nl, nm, C, D, F);
    matmul(ni, nl, nj, E, F, G);
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, G, 2, ni, nl, 0);
    if (f)
        fclose(f);
    return 0;
}
