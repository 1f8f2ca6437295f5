/* blackscholes: European call and put prices for n options (spot S, strike X, years T) under
 * rate R and volatility V, with N(d) = erfc(-d / sqrt 2) / 2 (samples/blackscholes.cu).
 *
 *   void blackscholes_omp(const float *S, const float *X, const float *T, float *call, float *put,
 *                         float R, float V, int n);
 *
 * Embarrassingly parallel; the loop-invariant parts of d1 are hoisted by hand. The four erfcf
 * calls stay (N(-d) is not rewritten as 1 - N(d)): same arithmetic as the kernel, so the
 * comparison measures the translation, not an algebraic shortcut.
 */
#include <math.h>

static inline float normal_cdf(float d)
{
    return 0.5f * erfcf(-d * 0.70710678118654752440f);
}

void blackscholes_omp(const float *restrict S, const float *restrict X, const float *restrict T,
                      float *restrict call, float *restrict put, float R, float V, int n)
{
    const float drift = R + 0.5f * V * V;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; ++i) {
        float s = S[i], x = X[i], t = T[i];
        float sqrt_t = sqrtf(t);
        float d1 = (logf(s / x) + drift * t) / (V * sqrt_t);
        float d2 = d1 - V * sqrt_t;
        float discount = x * expf(-R * t);
        call[i] = s * normal_cdf(d1) - discount * normal_cdf(d2);
        put[i] = discount * normal_cdf(-d2) - s * normal_cdf(-d1);
    }
}
