/* FDTD-2D: PolyBench/GPU's 2-D finite-difference time-domain kernel on NX x NY fields ex, ey, hz,
 * TMAX steps, the serial version's four updates per step each parallelized over rows. Output: hz. */
#include "port.h"

#ifndef TMAX
#define TMAX 500
#endif
#ifndef NX
#define NX 2048
#endif
#ifndef NY
#define NY 2048
#endif

int main(int argc, char **argv)
{
    const int tmax = TMAX, nx = NX, ny = NY;
    DATA_TYPE *fict = port_alloc(TMAX), *ex = port_alloc((size_t)nx * ny), *ey = port_alloc((size_t)nx * ny);
    DATA_TYPE *hz = port_alloc((size_t)nx * ny);
    for (int i = 0; i < tmax; ++i)
        fict[i] = (DATA_TYPE)i;
    for (int i = 0; i < nx; ++i)
        for (int j = 0; j < ny; ++j) {
            ex[(size_t)i * ny + j] = ((DATA_TYPE)i * (j + 1) + 1) / NX;
            ey[(size_t)i * ny + j] = ((DATA_TYPE)(i - 1) * (j + 2) + 2) / NX;
            hz[(size_t)i * ny + j] = ((DATA_TYPE)(i - 9) * (j + 4) + 3) / NX;
        }
#define EX(i, j) ex[(size_t)(i) * ny + (j)]
#define EY(i, j) ey[(size_t)(i) * ny + (j)]
#define HZ(i, j) hz[(size_t)(i) * ny + (j)]
    port_start();
    for (int t = 0; t < tmax; ++t) {
#pragma omp parallel for
        for (int j = 0; j < ny; ++j)
            EY(0, j) = fict[t];
#pragma omp parallel for
        for (int i = 1; i < nx; ++i)
            for (int j = 0; j < ny; ++j)
                EY(i, j) = EY(i, j) - 0.5 * (HZ(i, j) - HZ(i - 1, j));
#pragma omp parallel for
        for (int i = 0; i < nx; ++i)
            for (int j = 1; j < ny; ++j)
                EX(i, j) = EX(i, j) - 0.5 * (HZ(i, j) - HZ(i, j - 1));
#pragma omp parallel for
        for (int i = 0; i < nx - 1; ++i)
            for (int j = 0; j < ny - 1; ++j)
                HZ(i, j) = HZ(i, j) - 0.7 * (EX(i, j + 1) - EX(i, j) + EY(i + 1, j) - EY(i, j));
    }
    port_stop();
#undef EX
#undef EY
#undef HZ

    FILE *f = port_output(argc, argv);
    port_write(f, hz, 2, nx, ny, 0);
    if (f)
        fclose(f);
    return 0;
}
