// vecnorm: out[i] = in[i] / |in| for i < n, with the magnitude recomputed by every thread through
// a __device__ function that loops over the whole vector -- the naive O(n^2) form from the Enzyme
// talk, where optimizing before differentiating (hoisting mag out of the per-element work) turns
// an O(n^2) gradient into an O(n) one.
// Exercises: a __device__ function with a loop, called from a kernel with a pointer argument;
// sqrt on REAL; a guard.
#ifndef REAL
#define REAL float
#endif

__device__ REAL mag(const REAL* v, int n)
{
    REAL s = 0;
    for (int j = 0; j < n; ++j)
        s += v[j] * v[j];
    return sqrt(s);
}

__global__ void vecnorm(const REAL* in, REAL* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] / mag(in, n);
}
