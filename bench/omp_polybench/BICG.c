/* BICG: s = A^T r and q = A p, PolyBench/GPU's serial version. Its single i loop adds row i times
 * r[i] into every s[j] and sums q[i] along row i: here s keeps the serial walk along rows (i
 * outer, each s[j] summed in increasing i) with the j loop shared out among the threads of one
 * parallel region (a barrier per row), and q is one loop parallel over rows. Output: s, then q. */
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
    DATA_TYPE *A = port_alloc((size_t)nx * ny), *r = port_alloc(nx), *s = port_alloc(ny), *p = port_alloc(ny);
    DATA_TYPE *q = port_alloc(nx);
    for (int i = 0; i < ny; ++i)
        p[i] = i * M_PI;
    for (int i = 0; i < nx; ++i) {
        r[i] = i * M_PI;
        for (int j = 0; j < ny; ++j)
            A[(size_t)i * ny + j] = ((DATA_TYPE)i * j) / NX;
    }

    port_start();
#pragma omp parallel for
    for (int j = 0; j < ny; ++j)
        s[j] = 0;
#pragma omp parallel
    for (int i = 0; i < nx; ++i) {
#pragma omp for
        for (int j = 0; j < ny; ++j)
            s[j] = s[j] + r[i] * A[(size_t)i * ny + j];
    }
#pragma omp parallel for
    for (int i = 0; i < nx; ++i) {
        DATA_TYPE acc = 0;
        for (int j = 0; j < ny; ++j)
            acc = acc + A[(size_t)i * ny + j] * p[j];
        q[i] = acc;
    }
    port_stop();

    FILE *f = port_output(argc, argv);
    port_write(f, s, 1, ny, 0, 0);
    port_write(f, q, 1, nx, 0, 0);
    if (f)
        fclose(f);
    return 0;
}
