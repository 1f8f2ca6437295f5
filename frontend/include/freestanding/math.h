#ifndef POLYPY_MATH_H
#define POLYPY_MATH_H
#ifdef __cplusplus
extern "C" {
#endif
#define M_PI 3.14159265358979323846
#define M_E 2.7182818284590452354
#define M_SQRT2 1.41421356237309504880
#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))
#define HUGE_VAL (__builtin_huge_val())
#define POLYPY_HOST_MATH1(n) double n(double); float n##f(float);
#define POLYPY_HOST_MATH2(n) double n(double, double); float n##f(float, float);
POLYPY_HOST_MATH1(exp) POLYPY_HOST_MATH1(exp2) POLYPY_HOST_MATH1(expm1) POLYPY_HOST_MATH1(log)
POLYPY_HOST_MATH1(log2) POLYPY_HOST_MATH1(log10) POLYPY_HOST_MATH1(log1p) POLYPY_HOST_MATH1(sqrt)
POLYPY_HOST_MATH1(cbrt) POLYPY_HOST_MATH1(sin) POLYPY_HOST_MATH1(cos) POLYPY_HOST_MATH1(tan)
POLYPY_HOST_MATH1(asin) POLYPY_HOST_MATH1(acos) POLYPY_HOST_MATH1(atan) POLYPY_HOST_MATH1(sinh)
POLYPY_HOST_MATH1(cosh) POLYPY_HOST_MATH1(tanh) POLYPY_HOST_MATH1(asinh) POLYPY_HOST_MATH1(acosh)
POLYPY_HOST_MATH1(atanh) POLYPY_HOST_MATH1(erf) POLYPY_HOST_MATH1(erfc) POLYPY_HOST_MATH1(fabs)
POLYPY_HOST_MATH1(floor) POLYPY_HOST_MATH1(ceil) POLYPY_HOST_MATH1(trunc) POLYPY_HOST_MATH1(round)
POLYPY_HOST_MATH1(rint)
POLYPY_HOST_MATH2(pow) POLYPY_HOST_MATH2(atan2) POLYPY_HOST_MATH2(fmin) POLYPY_HOST_MATH2(fmax)
POLYPY_HOST_MATH2(fmod) POLYPY_HOST_MATH2(hypot) POLYPY_HOST_MATH2(copysign) POLYPY_HOST_MATH2(fdim)
POLYPY_HOST_MATH1(logb) POLYPY_HOST_MATH1(nearbyint) POLYPY_HOST_MATH2(remainder) POLYPY_HOST_MATH2(nextafter)
int ilogb(double); int ilogbf(float);
long lrint(double); long lrintf(float); long long llrint(double); long long llrintf(float);
long lround(double); long lroundf(float); long long llround(double); long long llroundf(float);
double remquo(double, double, int*); float remquof(float, float, int*);
double scalbn(double, int); float scalbnf(float, int); double scalbln(double, long); float scalblnf(float, long);
double fma(double, double, double);
float fmaf(float, float, float);
#ifdef __cplusplus
}
inline float fabs(float x) { return fabsf(x); }
inline bool isnan(double x) { return __builtin_isnan(x); }
inline bool isinf(double x) { return __builtin_isinf(x); }
inline bool isfinite(double x) { return __builtin_isfinite(x); }
extern "C" {
#endif
#undef POLYPY_HOST_MATH1
#undef POLYPY_HOST_MATH2
#ifdef __cplusplus
}
#endif
#endif
