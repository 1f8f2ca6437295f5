// Vector normalization with the magnitude recomputed in every iteration of a loop:
// out[i] = in[i] / mag(in). The naive form is O(n^2); hoisting mag out of the loop before
// differentiating makes both the kernel and its gradient O(n) (Enzyme talk: "differentiate
// after optimization"). One thread does the whole vector.
#ifndef REAL
#define REAL double
#endif

__device__ REAL mag(const REAL* v, int n)
{
    REAL s = 0;
    for (int j = 0; j < n; ++j)
        s += v[j] * v[j];
    return sqrt(s);
}

__global__ void normalize(const REAL* __restrict__ in, REAL* __restrict__ out, int n)
{
    for (int i = 0; i < n; ++i)
        out[i] = in[i] / mag(in, n);
}
