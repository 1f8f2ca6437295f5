// relu3: a piecewise "cubic ReLU", applied element-wise (after the relu3 example of the Enzyme
// talks, extended with a linear tail so that it stays C1 and bounded in slope):
//
//   y = 0            if x <= 0
//   y = x^3          if 0 < x < 1
//   y = 3x - 2       if x >= 1
//
// Exercises: data-dependent if / else-if branches per thread, pow on REAL, a guard.
// Differentiable away from the kinks at 0 and 1.
#ifndef REAL
#define REAL float
#endif

__global__ void relu3(const REAL* x, REAL* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        REAL v = x[i];
        REAL r;
        if (v <= 0)
            r = 0;
        else if (v < 1)
            r = pow(v, (REAL)3);
        else
            r = (REAL)3 * v - (REAL)2;
        y[i] = r;
    }
}
