/* ATAX: y = A^T (A x), PolyBench/GPU's serial version. Its single i loop adds row i's share into
 * every y[j], so it is split in two parallel loops: tmp = A x over rows i (each tmp[i] summed in
 * increasing j), then y = A^T tmp over columns j (each y[j] summed in increasing i, the serial
 * version's order). Output: y. */
#include "port.h"

#ifndef NX
#define NX 4096
#endif
#ifndef NY
#define NY 4096
#endif
#ifndef M_PI
#define M_PI 3.14159
#endif

int main(int argc, char **argv)
{
    const int nx = NX, ny = NY;
    DATA_TYPE *A = port_alloc((size_t)nx * ny), *x = port_alloc(ny), *y = port_alloc(ny), *tmp = port_alloc(nx);
    for (int i = 0; i < nx; ++i) {
        x[i] = i * M_PI;
        for (int j = 0; j < ny; ++j)
            A[(size_t)i * ny + j] = ((DATA_TYPE)i * j) / NX;
    }

    port_start();
#pragma omp parallel for
    for (int i = 0; i < nx; ++i) {
        DATA_TYPE s = 0;
        for (int j = 0; j < ny; ++j)
            s = s + A[(size_t)i * ny + j] * x[j];
        tmp[i] = s;
    }
#pragma omp parallel for
    for (int j = 0; j < ny; ++j) {
        DATA_TYPE s = 0;
        for (int i = 0; i < nx; ++i)
            s = s + A[(size_t)i * ny + j] * tmp[i];
        y[j] = s;
    }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, y, 1, ny, 0, 0);
    if (f)
        fclose(f);
    return 0;
}
