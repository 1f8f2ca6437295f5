/* The complex numbers of CUDA's <cuComplex.h>, written for polypy: cuFloatComplex is float2 and
 * cuDoubleComplex double2 (x the real part, y the imaginary part), and every function is a
 * __host__ __device__ inline one, so host references and kernels compute alike. Each function
 * computes what CUDA's does, operation by operation: a product is (a*c - b*d, a*d + b*c); a
 * quotient scales both operands by 1 / (|Re y| + |Im y|) before dividing (no overflow for large
 * operands); an absolute value is v * sqrt(1 + (w/v)^2) with v the larger and w the smaller
 * magnitude of the two parts, or v + w where v is 0 or either part exceeds the type's largest
 * finite value; cuCfma(x, y, d) is x*y + d summed as Re = (-(Im x * Im y)) + ((Re x * Re y) + Re d),
 * Im = (Im x * Re y) + ((Re x * Im y) + Im d). */
#ifndef POLYPY_CUCOMPLEX_H
#define POLYPY_CUCOMPLEX_H
#include <cuda_runtime.h>
#include <math.h>

typedef float2 cuFloatComplex;
typedef double2 cuDoubleComplex;
typedef cuFloatComplex cuComplex;

__host__ __device__ static __inline__ float cuCrealf(cuFloatComplex z) { return z.x; }
__host__ __device__ static __inline__ float cuCimagf(cuFloatComplex z) { return z.y; }
__host__ __device__ static __inline__ cuFloatComplex make_cuFloatComplex(float re, float im) {
  cuFloatComplex z;
  z.x = re;
  z.y = im;
  return z;
}
__host__ __device__ static __inline__ cuComplex make_cuComplex(float re, float im) {
  return make_cuFloatComplex(re, im);
}
__host__ __device__ static __inline__ cuFloatComplex cuConjf(cuFloatComplex z) {
  return make_cuFloatComplex(z.x, -z.y);
}
__host__ __device__ static __inline__ cuFloatComplex cuCaddf(cuFloatComplex a, cuFloatComplex b) {
  return make_cuFloatComplex(a.x + b.x, a.y + b.y);
}
__host__ __device__ static __inline__ cuFloatComplex cuCsubf(cuFloatComplex a, cuFloatComplex b) {
  return make_cuFloatComplex(a.x - b.x, a.y - b.y);
}
__host__ __device__ static __inline__ cuFloatComplex cuCmulf(cuFloatComplex a, cuFloatComplex b) {
  float re = (a.x * b.x) - (a.y * b.y);
  float im = (a.x * b.y) + (a.y * b.x);
  return make_cuFloatComplex(re, im);
}
__host__ __device__ static __inline__ cuFloatComplex cuCdivf(cuFloatComplex a, cuFloatComplex b) {
  float scale = fabsf(b.x) + fabsf(b.y);
  float inv = 1.0f / scale;
  float ar = a.x * inv, ai = a.y * inv, br = b.x * inv, bi = b.y * inv;
  float den = (br * br) + (bi * bi);
  float inv_den = 1.0f / den;
  return make_cuFloatComplex(((ar * br) + (ai * bi)) * inv_den, ((ai * br) - (ar * bi)) * inv_den);
}
__host__ __device__ static __inline__ float cuCabsf(cuFloatComplex z) {
  float re = fabsf(z.x), im = fabsf(z.y);
  float big = re > im ? re : im;
  float small = re > im ? im : re;
  float ratio = small / big;
  float r = big * sqrtf(1.0f + ratio * ratio);
  if (big == 0.0f || big > 3.402823466e38f || small > 3.402823466e38f) r = big + small;
  return r;
}
__host__ __device__ static __inline__ cuFloatComplex cuCfmaf(cuFloatComplex x, cuFloatComplex y, cuFloatComplex d) {
  float re = (x.x * y.x) + d.x;
  float im = (x.x * y.y) + d.y;
  re = -(x.y * y.y) + re;
  im = (x.y * y.x) + im;
  return make_cuFloatComplex(re, im);
}

__host__ __device__ static __inline__ double cuCreal(cuDoubleComplex z) { return z.x; }
__host__ __device__ static __inline__ double cuCimag(cuDoubleComplex z) { return z.y; }
__host__ __device__ static __inline__ cuDoubleComplex make_cuDoubleComplex(double re, double im) {
  cuDoubleComplex z;
  z.x = re;
  z.y = im;
  return z;
}
__host__ __device__ static __inline__ cuDoubleComplex cuConj(cuDoubleComplex z) {
  return make_cuDoubleComplex(z.x, -z.y);
}
__host__ __device__ static __inline__ cuDoubleComplex cuCadd(cuDoubleComplex a, cuDoubleComplex b) {
  return make_cuDoubleComplex(a.x + b.x, a.y + b.y);
}
__host__ __device__ static __inline__ cuDoubleComplex cuCsub(cuDoubleComplex a, cuDoubleComplex b) {
  return make_cuDoubleComplex(a.x - b.x, a.y - b.y);
}
__host__ __device__ static __inline__ cuDoubleComplex cuCmul(cuDoubleComplex a, cuDoubleComplex b) {
  double re = (a.x * b.x) - (a.y * b.y);
  double im = (a.x * b.y) + (a.y * b.x);
  return make_cuDoubleComplex(re, im);
}
__host__ __device__ static __inline__ cuDoubleComplex cuCdiv(cuDoubleComplex a, cuDoubleComplex b) {
  double scale = fabs(b.x) + fabs(b.y);
  double inv = 1.0 / scale;
  double ar = a.x * inv, ai = a.y * inv, br = b.x * inv, bi = b.y * inv;
  double den = (br * br) + (bi * bi);
  double inv_den = 1.0 / den;
  return make_cuDoubleComplex(((ar * br) + (ai * bi)) * inv_den, ((ai * br) - (ar * bi)) * inv_den);
}
__host__ __device__ static __inline__ double cuCabs(cuDoubleComplex z) {
  double re = fabs(z.x), im = fabs(z.y);
  double big = re > im ? re : im;
  double small = re > im ? im : re;
  double ratio = small / big;
  double r = big * sqrt(1.0 + ratio * ratio);
  if (big == 0.0 || big > 1.79769313486231570e+308 || small > 1.79769313486231570e+308) r = big + small;
  return r;
}
__host__ __device__ static __inline__ cuDoubleComplex cuCfma(cuDoubleComplex x, cuDoubleComplex y, cuDoubleComplex d) {
  double re = (x.x * y.x) + d.x;
  double im = (x.x * y.y) + d.y;
  re = -(x.y * y.y) + re;
  im = (x.y * y.x) + im;
  return make_cuDoubleComplex(re, im);
}

__host__ __device__ static __inline__ cuDoubleComplex cuComplexFloatToDouble(cuFloatComplex z) {
  return make_cuDoubleComplex((double)z.x, (double)z.y);
}
__host__ __device__ static __inline__ cuFloatComplex cuComplexDoubleToFloat(cuDoubleComplex z) {
  return make_cuFloatComplex((float)z.x, (float)z.y);
}

#endif /* POLYPY_CUCOMPLEX_H */
