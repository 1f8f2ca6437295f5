/* GRAMSCHM: modified Gram-Schmidt QR of the NI x NJ matrix A, PolyBench/GPU's serial version: for
 * each column k in turn, its norm (summed serially, in the serial order), Q's column k (parallel
 * over rows), then the projection out of every later column j (parallel over j). The program's
 * first column is all zeros (A[i][j] = i j / ni), so R[0][0] = 0 and every later column becomes
 * NaN (0/0), in the program as here. Output: A. */
#include "port.h"

#ifndef NI
#define NI 2048
#endif
#ifndef NJ
#define NJ 2048
#endif

int main(int argc, char **argv)
{
    const int ni = NI, nj = NJ;
    DATA_TYPE *A = port_alloc((size_t)ni * nj), *R = port_alloc((size_t)nj * nj), *Q = port_alloc((size_t)ni * nj);
    for (int i = 0; i < ni; ++i)
        for (int j = 0; j < nj; ++j) {
            A[(size_t)i * nj + j] = ((DATA_TYPE)i * j) / ni;
            Q[(size_t)i * nj + j] = ((DATA_TYPE)i * (j + 1)) / nj;
        }
    for (int i = 0; i < nj; ++i)
        for (int j = 0; j < nj; ++j)
            R[(size_t)i * nj + j] = ((DATA_TYPE)i * (j + 2)) / nj;
#define a(i, j) A[(size_t)(i) * nj + (j)]
#define q(i, j) Q[(size_t)(i) * nj + (j)]
#define r(i, j) R[(size_t)(i) * nj + (j)]
    port_start();
    for (int k = 0; k < nj; ++k) {
        DATA_TYPE nrm = 0;
        for (int i = 0; i < ni; ++i)
            nrm += a(i, k) * a(i, k);
        r(k, k) = sqrt(nrm);
#pragma omp parallel for
        for (int i = 0; i < ni; ++i)
            q(i, k) = a(i, k) / r(k, k);
#pragma omp parallel for
        for (int j = k + 1; j < nj; ++j) {
            DATA_TYPE s = 0;
            for (int i = 0; i < ni; ++i)
                s += q(i, k) * a(i, j);
            r(k, j) = s;
            for (int i = 0; i < ni; ++i)
                a(i, j) = a(i, j) - q(i, k) * s;
        }
    }
    port_stop();
#undef a
#undef q
#undef r

    FILE *f = port_output(argc, argv);
    port_write(f, A, 2, ni, nj, 0);
    if (f)
        fclose(f);
    return 0;
}
