/* DOITGEN: for each (r, q), sum[r][q][:] = A[r][q][:] C4 and A[r][q][:] = sum[r][q][:]
 * (NR x NQ x NP arrays, NP x NP C4), PolyBench/GPU's serial version (older tree, the program's
 * fixed sizes) parallelized over r. Output: sum. */
#include "port.h"

#ifndef NR
#define NR 128
#endif
#ifndef NQ
#define NQ 128
#endif
#ifndef NP
#define NP 128
#endif

int main(int argc, char **argv)
{
    DATA_TYPE *A = port_alloc((size_t)NR * NQ * NP), *C4 = port_alloc((size_t)NP * NP);
    DATA_TYPE *sum = port_alloc((size_t)NR * NQ * NP);
    for (int i = 0; i < NR; ++i)
        for (int j = 0; j < NQ; ++j)
            for (int k = 0; k < NP; ++k)
                A[(size_t)i * (NQ * NP) + j * NP + k] = ((DATA_TYPE)i * j + k) / NP;
    for (int i = 0; i < NP; ++i)
        for (int j = 0; j < NP; ++j)
            C4[i * NP + j] = ((DATA_TYPE)i * j) / NP;

    port_start();
#pragma omp parallel for
    for (int r = 0; r < NR; ++r)
        for (int q = 0; q < NQ; ++q) {
            DATA_TYPE *a = A + (size_t)r * (NQ * NP) + q * NP, *out = sum + (size_t)r * (NQ * NP) + q * NP;
            for (int p = 0; p < NP; ++p) {
                DATA_TYPE s = (DATA_TYPE)0.0;
                for (int k = 0; k < NP; ++k)
                    s = s + a[k] * C4[k * NP + p];
                out[p] = s;
            }
            for (int p = 0; p < NP; ++p)
                a[p] = out[p];
        }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, sum, 3, NR, NQ, NP);
    if (f)
        fclose(f);
    return 0;
}
