// saxpy: y[i] = a * x[i] + y[i] for every i < n.
// Exercises: the basic 1-D global index, an `if (i < n)` guard for a partial last block,
// an active floating-point scalar argument, an in/out buffer.
#ifndef REAL
#define REAL float
#endif

__global__ void saxpy(int n, REAL a, const REAL* x, REAL* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
