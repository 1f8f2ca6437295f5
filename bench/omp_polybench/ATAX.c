/* ATAX: y = A^T (A x), PolyBench/GPU's serial version. Its single i loop computes tmp[i] (a sum
 * along row i) and then adds row i times tmp[i] into every y[j]: here tmp = A x is one loop
 * parallel over rows, and y keeps the serial walk along rows (i outer, each y[j] summed in
 * increasing i) with the j loop shared out among the threads of one parallel region (a barrier
 * per row). Output: y. */
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
    for (int j = 0; j < ny; ++j)
        y[j] = 0;
#pragma omp parallel for
    for (int i = 0; i < nx; ++i) {
        DATA_TYPE s = 0;
        for (int j = 0; j < ny; ++j)
            s = s + A[(size_t)i * ny + j] * x[j];
        tmp[i] = s;
    }
#pragma omp parallel
    for (int i = 0; i < nx; ++i) {
#pragma omp for
        for (int j = 0; j < ny; ++j)
            y[j] = y[j] + A[(size_t)i * ny + j] * tmp[i];
    }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, y, 1, ny, 0, 0);
    if (f)
        fclose(f);
    return 0;
}
