/* 3MM: three matrix products, parallelized over rows, as PolyBench/GPU's program runs its serial
 * version (three i, j, k nests, products added in increasing k). The program passes its arrays
 * to mm3Cuda and mm3_cpu in the order A, B, C, D, E, F, G, where both functions take them as
 * E, A, B, F, C, D, G: what runs is A := B C, then D := E F with E and F never initialized (fresh
 * memory: zeros), then G := A D, so G is all zeros. This port computes the same, with the same
 * arrays in the same roles (E and F zeroed, as fresh pages are). Output: G. */
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
    /* each array large enough for its own shape and for the role it takes (equal by default) */
    int big = ni;
    big = nj > big ? nj : big;
    big = nk > big ? nk : big;
    big = nl > big ? nl : big;
    big = nm > big ? nm : big;
    const size_t room = (size_t)big * big;
    DATA_TYPE *A = port_alloc(room), *B = port_alloc(room), *C = port_alloc(room), *D = port_alloc(room);
    DATA_TYPE *E = port_alloc(room), *F = port_alloc(room), *G = port_alloc(room);
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
    /* mm3_cpu(E = A, A = B, B = C, F = D, C = E, D = F, G): E := A B, F := C D, G := E F in its names */
    matmul(ni, nj, nk, B, C, A);
    matmul(nj, nl, nm, E, F, D);
    matmul(ni, nl, nj, A, D, G);
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, G, 2, ni, nl, 0);
    if (f)
        fclose(f);
    return 0;
}
