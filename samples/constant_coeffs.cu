// constant_coeffs: causal FIR filter y[i] = sum_{k < NTAPS} taps[k] * x[i - k], x = 0 before 0.
// Exercises: a __constant__ array with an initializer (read-only, same address for every thread),
// a fixed-trip-count inner loop with a data-independent guard, REAL.
#ifndef REAL
#define REAL float
#endif

#define NTAPS 8

// A symmetric low-pass window (sums to 1); samples/constant_coeffs.py repeats these values.
__constant__ REAL taps[NTAPS] = {0.02, 0.06, 0.14, 0.28, 0.28, 0.14, 0.06, 0.02};

__global__ void constant_coeffs(const REAL* x, REAL* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        REAL acc = 0;
        for (int k = 0; k < NTAPS; ++k)
            if (i - k >= 0)
                acc += taps[k] * x[i - k];
        y[i] = acc;
    }
}
