// blackscholes: European call and put prices for n options (spot S, strike X, years to expiry T)
// under a common risk-free rate R and volatility V:
//
//   d1 = (log(S/X) + (R + V^2/2) T) / (V sqrt(T)),  d2 = d1 - V sqrt(T)
//   call = S N(d1) - X e^{-RT} N(d2),  put = X e^{-RT} N(-d2) - S N(-d1)
//
// with the standard normal CDF N(d) = erfc(-d / sqrt(2)) / 2.
// Exercises: a __device__ helper, log/sqrt/exp/erfc on REAL, two outputs per thread, active
// scalar parameters (R, V) whose gradients are sums over all threads.
#ifndef REAL
#define REAL float
#endif

__device__ REAL normal_cdf(REAL d)
{
    const REAL inv_sqrt2 = (REAL)0.70710678118654752440;
    return (REAL)0.5 * erfc(-d * inv_sqrt2);
}

__global__ void blackscholes(const REAL* S, const REAL* X, const REAL* T, REAL* call, REAL* put,
                             REAL R, REAL V, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        REAL s = S[i], x = X[i], t = T[i];
        REAL sqrt_t = sqrt(t);
        REAL d1 = (log(s / x) + (R + (REAL)0.5 * V * V) * t) / (V * sqrt_t);
        REAL d2 = d1 - V * sqrt_t;
        REAL discount = x * exp(-R * t);
        call[i] = s * normal_cdf(d1) - discount * normal_cdf(d2);
        put[i] = discount * normal_cdf(-d2) - s * normal_cdf(-d1);
    }
}
