/* polypy's CUDA device prelude, force-included by the frontend before every source file.
 *
 * It declares what nvcc's headers would: the execution-space attributes, the built-in index
 * variables, __syncthreads, atomics, warp intrinsics and the device math library. Nothing here
 * is ever compiled: the frontend recognizes these declarations by name and maps them to IR.
 * Host-side types and the runtime API come from polypy's cuda_runtime.h, included below.
 */
#ifndef POLYPY_DEVICE_H
#define POLYPY_DEVICE_H

#ifdef POLYPY_TORCH_EXTENSION
/* A PyTorch extension (polypy.torch.load): PyTorch's headers first, read as the host compiler
 * reads them when it builds the translated extension (no __CUDACC__, none of the macros below);
 * polypy_torch_host.h is in polypy/runtime/torch, on the include path polypy.torch gives. */
#include <polypy_torch_host.h>
#endif

#ifdef __cplusplus
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
/* A __managed__ variable is a __device__ variable the host may also use directly (as nvcc has it). */
#define __managed__ __attribute__((managed)) __attribute__((device))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define POLYPY_OVERLOAD
#define POLYPY_DEFAULT(v) = v
#else
/* C sources: no CUDA mode in clang, so the attributes become annotations the frontend reads. */
#define __global__ __attribute__((annotate("polypy_global")))
#define __device__ __attribute__((annotate("polypy_device")))
#define __host__ __attribute__((annotate("polypy_host")))
#define __shared__ __attribute__((annotate("polypy_shared")))
#define __constant__ __attribute__((annotate("polypy_constant")))
#define __managed__ __attribute__((annotate("polypy_device")))
#define __launch_bounds__(...)
#define POLYPY_OVERLOAD __attribute__((overloadable))
#define POLYPY_DEFAULT(v)
#endif
#define __forceinline__ inline __attribute__((always_inline))
#ifndef __cplusplus
#define __noinline__ __attribute__((noinline))
#endif
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
/* A kernel parameter that stays in the launch's parameter memory (CUDA 11.7): it is const, and its
 * address may be taken; a by-value parameter of the translated kernel has both properties. */
#define __grid_constant__

#ifdef __cplusplus
/* The device overloads of the C library's double functions, declared (again below) before
 * <cuda_runtime.h> brings <math.h>: libstdc++'s <cmath> takes them into std there (`using ::exp`),
 * so that std::exp(double) in device code finds the device function. */
#define POLYPY_EARLY1(name) static __device__ double name(double);
#define POLYPY_EARLY2(name) static __device__ double name(double, double);
POLYPY_EARLY1(exp) POLYPY_EARLY1(exp2) POLYPY_EARLY1(expm1) POLYPY_EARLY1(log) POLYPY_EARLY1(log2)
POLYPY_EARLY1(log10) POLYPY_EARLY1(log1p) POLYPY_EARLY1(sqrt) POLYPY_EARLY1(cbrt) POLYPY_EARLY1(sin)
POLYPY_EARLY1(cos) POLYPY_EARLY1(tan) POLYPY_EARLY1(asin) POLYPY_EARLY1(acos) POLYPY_EARLY1(atan)
POLYPY_EARLY1(sinh) POLYPY_EARLY1(cosh) POLYPY_EARLY1(tanh) POLYPY_EARLY1(asinh) POLYPY_EARLY1(acosh)
POLYPY_EARLY1(atanh) POLYPY_EARLY1(erf) POLYPY_EARLY1(erfc) POLYPY_EARLY1(fabs) POLYPY_EARLY1(floor)
POLYPY_EARLY1(ceil) POLYPY_EARLY1(trunc) POLYPY_EARLY1(round) POLYPY_EARLY1(rint) POLYPY_EARLY1(logb)
POLYPY_EARLY1(nearbyint) POLYPY_EARLY1(lgamma) POLYPY_EARLY1(tgamma)
POLYPY_EARLY2(pow) POLYPY_EARLY2(atan2) POLYPY_EARLY2(fmin) POLYPY_EARLY2(fmax) POLYPY_EARLY2(fmod)
POLYPY_EARLY2(hypot) POLYPY_EARLY2(copysign) POLYPY_EARLY2(fdim) POLYPY_EARLY2(remainder) POLYPY_EARLY2(nextafter)
static __device__ double fma(double, double, double);
static __device__ int ilogb(double);
static __device__ long lrint(double); static __device__ long long llrint(double);
static __device__ long lround(double); static __device__ long long llround(double);
static __device__ double remquo(double, double, int*);
static __device__ double scalbn(double, int); static __device__ double scalbln(double, long);
static __device__ double frexp(double, int*); static __device__ double ldexp(double, int);
static __device__ double modf(double, double*);
#undef POLYPY_EARLY1
#undef POLYPY_EARLY2
#endif

#ifdef __cplusplus
#include <cuda_runtime.h>
#else
struct uint3 { unsigned int x, y, z; };
typedef struct uint3 uint3;
typedef struct uint3 dim3;
struct float2 { float x, y; }; typedef struct float2 float2;
struct float4 { float x, y, z, w; } __attribute__((aligned(16))); typedef struct float4 float4;
#endif

/* The launch machinery clang's CUDA mode expects for `kernel<<<grid, block, shmem, stream>>>`. */
#ifdef __cplusplus
extern "C" unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, unsigned long sharedMem = 0,
                                                void* stream = 0);
extern "C" int cudaConfigureCall(dim3 gridDim, dim3 blockDim, unsigned long sharedMem = 0, cudaStream_t stream = 0);
#endif

/* warpSize is a built-in constant in CUDA; an enumerator keeps `prop.warpSize` members working. */
enum { warpSize = 32 };

/* The built-in index variables. */
extern const __device__ uint3 threadIdx;
extern const __device__ uint3 blockIdx;
extern const __device__ dim3 blockDim;
extern const __device__ dim3 gridDim;

#define POLYPY_D static __device__ POLYPY_OVERLOAD
/* The C library's names (abs, sqrt, expf, and glibc's __expf ...): in C they are declared as <stdlib.h> and <math.h>
 * declare them (extern, not overloadable; clang refuses a redeclaration that differs in that), so
 * those headers may come before or after this prelude. */
#ifdef __cplusplus
#define POLYPY_LIBC POLYPY_D
#else
#define POLYPY_LIBC __device__
#endif

/* Synchronization. */
/* (Not static: clang's CUDA mode already knows some of these as builtins.) */
__device__ void __syncthreads(void);
__device__ int __syncthreads_count(int);
__device__ int __syncthreads_and(int);
__device__ int __syncthreads_or(int);
__device__ void __syncwarp(unsigned int mask POLYPY_DEFAULT(0xffffffffu));
__device__ void __threadfence(void);
__device__ void __threadfence_block(void);
__device__ void __threadfence_system(void);

/* Atomics (the frontend maps them by name; the types follow the CUDA programming guide), each
 * also in its system- and block-scoped forms (atomicAdd_system, atomicAdd_block). */
#define POLYPY_ATOMIC_ARITH(name, T) POLYPY_D T name(T* address, T val); \
  POLYPY_D T name##_system(T* address, T val); POLYPY_D T name##_block(T* address, T val);
#define POLYPY_ATOMIC_INTS(name) POLYPY_ATOMIC_ARITH(name, int) POLYPY_ATOMIC_ARITH(name, unsigned int) \
  POLYPY_ATOMIC_ARITH(name, unsigned long long)
POLYPY_ATOMIC_INTS(atomicAdd)
POLYPY_ATOMIC_ARITH(atomicAdd, float)
POLYPY_ATOMIC_ARITH(atomicAdd, double)
POLYPY_ATOMIC_ARITH(atomicSub, int)
POLYPY_ATOMIC_ARITH(atomicSub, unsigned int)
POLYPY_ATOMIC_INTS(atomicExch)
POLYPY_ATOMIC_ARITH(atomicExch, float)
POLYPY_ATOMIC_INTS(atomicMin)
POLYPY_ATOMIC_ARITH(atomicMin, long long)
POLYPY_ATOMIC_INTS(atomicMax)
POLYPY_ATOMIC_ARITH(atomicMax, long long)
POLYPY_ATOMIC_INTS(atomicAnd)
POLYPY_ATOMIC_INTS(atomicOr)
POLYPY_ATOMIC_INTS(atomicXor)
POLYPY_ATOMIC_ARITH(atomicInc, unsigned int)
POLYPY_ATOMIC_ARITH(atomicDec, unsigned int)
#define POLYPY_ATOMIC_CAS(name, T) POLYPY_D T name(T* address, T compare, T val);
#define POLYPY_ATOMIC_CAS_SCOPES(T) POLYPY_ATOMIC_CAS(atomicCAS, T) POLYPY_ATOMIC_CAS(atomicCAS_system, T) \
  POLYPY_ATOMIC_CAS(atomicCAS_block, T)
POLYPY_ATOMIC_CAS_SCOPES(int)
POLYPY_ATOMIC_CAS_SCOPES(unsigned int)
POLYPY_ATOMIC_CAS_SCOPES(unsigned long long)
/* The 16-bit compare-and-swap (sm_70 and later; CUDA declares no scoped forms of it). */
POLYPY_ATOMIC_CAS(atomicCAS, unsigned short int)

/* Warp intrinsics (32 lanes). */
#define POLYPY_SHFL(T) \
  POLYPY_D T __shfl_sync(unsigned int mask, T var, int srcLane, int width POLYPY_DEFAULT(32)); \
  POLYPY_D T __shfl_up_sync(unsigned int mask, T var, unsigned int delta, int width POLYPY_DEFAULT(32)); \
  POLYPY_D T __shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width POLYPY_DEFAULT(32)); \
  POLYPY_D T __shfl_xor_sync(unsigned int mask, T var, int laneMask, int width POLYPY_DEFAULT(32));
POLYPY_SHFL(int)
POLYPY_SHFL(unsigned int)
POLYPY_SHFL(long long)
POLYPY_SHFL(unsigned long long)
POLYPY_SHFL(float)
POLYPY_SHFL(double)
POLYPY_D unsigned int __ballot_sync(unsigned int mask, int predicate);
POLYPY_D int __any_sync(unsigned int mask, int predicate);
POLYPY_D int __all_sync(unsigned int mask, int predicate);
POLYPY_D unsigned int __activemask(void);
/* Volta's warp collectives (frontend/lower/warp_collectives.py: full-warp masks). */
#define POLYPY_REDUCE(op) POLYPY_D unsigned int __reduce_##op##_sync(unsigned int mask, unsigned int value);
POLYPY_REDUCE(add) POLYPY_REDUCE(min) POLYPY_REDUCE(max) POLYPY_REDUCE(and) POLYPY_REDUCE(or) POLYPY_REDUCE(xor)
#ifdef __cplusplus
POLYPY_D int __reduce_add_sync(unsigned int mask, int value);
POLYPY_D int __reduce_min_sync(unsigned int mask, int value);
POLYPY_D int __reduce_max_sync(unsigned int mask, int value);
#define POLYPY_MATCH(T) POLYPY_D unsigned int __match_any_sync(unsigned int mask, T value); \
  POLYPY_D unsigned int __match_all_sync(unsigned int mask, T value, int* pred);
POLYPY_MATCH(int) POLYPY_MATCH(unsigned int) POLYPY_MATCH(long) POLYPY_MATCH(unsigned long)
POLYPY_MATCH(long long) POLYPY_MATCH(unsigned long long) POLYPY_MATCH(float) POLYPY_MATCH(double)
#endif

/* Read-only and cache-hinted loads and stores (the hints change nothing in what is computed). */
#define POLYPY_LDG(T) POLYPY_D T __ldg(const T* ptr); POLYPY_D T __ldcg(const T* ptr); \
  POLYPY_D T __ldca(const T* ptr); POLYPY_D T __ldcs(const T* ptr); POLYPY_D T __ldlu(const T* ptr); \
  POLYPY_D T __ldcv(const T* ptr); POLYPY_D void __stcg(T* ptr, T value); POLYPY_D void __stcs(T* ptr, T value); \
  POLYPY_D void __stwb(T* ptr, T value); POLYPY_D void __stwt(T* ptr, T value);
POLYPY_LDG(float) POLYPY_LDG(double) POLYPY_LDG(int) POLYPY_LDG(unsigned int)
POLYPY_LDG(long long) POLYPY_LDG(unsigned long long)
#ifdef __cplusplus
POLYPY_LDG(short) POLYPY_LDG(unsigned short) POLYPY_LDG(char) POLYPY_LDG(signed char) POLYPY_LDG(unsigned char)
POLYPY_LDG(long) POLYPY_LDG(unsigned long)
POLYPY_LDG(float2) POLYPY_LDG(float4) POLYPY_LDG(double2) POLYPY_LDG(int2) POLYPY_LDG(int4)
POLYPY_LDG(uint2) POLYPY_LDG(uint4)
#endif

/* Integer helpers. */
POLYPY_D int min(int, int);
POLYPY_D unsigned int min(unsigned int, unsigned int);
POLYPY_D long long min(long long, long long);
POLYPY_D unsigned long long min(unsigned long long, unsigned long long);
POLYPY_D int max(int, int);
POLYPY_D unsigned int max(unsigned int, unsigned int);
POLYPY_D long long max(long long, long long);
POLYPY_D unsigned long long max(unsigned long long, unsigned long long);
/* CUDA's math headers also overload min/max for long and for operands of mixed signedness (both
 * converted to the unsigned type, the result's), so that min(unsigned, int) is not ambiguous. */
POLYPY_D long min(long, long);
POLYPY_D unsigned long min(unsigned long, unsigned long);
POLYPY_D unsigned int min(unsigned int, int);
POLYPY_D unsigned int min(int, unsigned int);
POLYPY_D unsigned long min(unsigned long, long);
POLYPY_D unsigned long min(long, unsigned long);
POLYPY_D unsigned long long min(unsigned long long, long long);
POLYPY_D unsigned long long min(long long, unsigned long long);
POLYPY_D long max(long, long);
POLYPY_D unsigned long max(unsigned long, unsigned long);
POLYPY_D unsigned int max(unsigned int, int);
POLYPY_D unsigned int max(int, unsigned int);
POLYPY_D unsigned long max(unsigned long, long);
POLYPY_D unsigned long max(long, unsigned long);
POLYPY_D unsigned long long max(unsigned long long, long long);
POLYPY_D unsigned long long max(long long, unsigned long long);
POLYPY_D unsigned int umin(unsigned int, unsigned int);
POLYPY_D unsigned int umax(unsigned int, unsigned int);
POLYPY_D long long llmin(long long, long long);
POLYPY_D long long llmax(long long, long long);
POLYPY_D unsigned long long ullmin(unsigned long long, unsigned long long);
POLYPY_D unsigned long long ullmax(unsigned long long, unsigned long long);
POLYPY_LIBC int abs(int);
POLYPY_LIBC long long llabs(long long);
POLYPY_D int __popc(unsigned int);
POLYPY_D int __popcll(unsigned long long);
POLYPY_D int __clz(int);
POLYPY_D int __clzll(long long);
POLYPY_D int __ffs(int);
POLYPY_D int __ffsll(long long);
POLYPY_D int __mul24(int, int);
POLYPY_D unsigned int __umul24(unsigned int, unsigned int);
POLYPY_D int __mulhi(int, int);
POLYPY_D unsigned int __umulhi(unsigned int, unsigned int);
POLYPY_D long long __mul64hi(long long, long long);
POLYPY_D unsigned long long __umul64hi(unsigned long long, unsigned long long);
POLYPY_D unsigned int __brev(unsigned int);
POLYPY_D unsigned long long __brevll(unsigned long long);
POLYPY_D unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s);
POLYPY_D unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift);
POLYPY_D unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift);
POLYPY_D unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift);
POLYPY_D unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift);
POLYPY_D unsigned int __sad(int x, int y, unsigned int z);
POLYPY_D unsigned int __usad(unsigned int x, unsigned int y, unsigned int z);
POLYPY_D int __hadd(int, int);
POLYPY_D int __rhadd(int, int);
POLYPY_D unsigned int __uhadd(unsigned int, unsigned int);
POLYPY_D unsigned int __urhadd(unsigned int, unsigned int);
POLYPY_D int __dp4a(int srcA, int srcB, int c);
POLYPY_D unsigned int __dp4a(unsigned int srcA, unsigned int srcB, unsigned int c);
/* SIMD-in-word intrinsics: two 16-bit or four 8-bit lanes of an unsigned int (frontend/lower/simd_intrinsics.py). */
POLYPY_D unsigned int __vadd2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsub2(unsigned int, unsigned int);
POLYPY_D unsigned int __vaddss2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsubss2(unsigned int, unsigned int);
POLYPY_D unsigned int __vaddus2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsubus2(unsigned int, unsigned int);
POLYPY_D unsigned int __vabsdiffs2(unsigned int, unsigned int);
POLYPY_D unsigned int __vabsdiffu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vavgu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vhaddu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vmaxs2(unsigned int, unsigned int);
POLYPY_D unsigned int __vmaxu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vmins2(unsigned int, unsigned int);
POLYPY_D unsigned int __vminu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsads2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsadu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vabs2(unsigned int);
POLYPY_D unsigned int __vabsss2(unsigned int);
POLYPY_D unsigned int __vneg2(unsigned int);
POLYPY_D unsigned int __vnegss2(unsigned int);
POLYPY_D unsigned int __vcmpeq2(unsigned int, unsigned int);
POLYPY_D unsigned int __vseteq2(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpne2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetne2(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpges2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetges2(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpgeu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetgeu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpgts2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetgts2(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpgtu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetgtu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmples2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetles2(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpleu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetleu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmplts2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetlts2(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpltu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetltu2(unsigned int, unsigned int);
POLYPY_D unsigned int __vadd4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsub4(unsigned int, unsigned int);
POLYPY_D unsigned int __vaddss4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsubss4(unsigned int, unsigned int);
POLYPY_D unsigned int __vaddus4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsubus4(unsigned int, unsigned int);
POLYPY_D unsigned int __vabsdiffs4(unsigned int, unsigned int);
POLYPY_D unsigned int __vabsdiffu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vavgu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vhaddu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vmaxs4(unsigned int, unsigned int);
POLYPY_D unsigned int __vmaxu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vmins4(unsigned int, unsigned int);
POLYPY_D unsigned int __vminu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsads4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsadu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vabs4(unsigned int);
POLYPY_D unsigned int __vabsss4(unsigned int);
POLYPY_D unsigned int __vneg4(unsigned int);
POLYPY_D unsigned int __vnegss4(unsigned int);
POLYPY_D unsigned int __vcmpeq4(unsigned int, unsigned int);
POLYPY_D unsigned int __vseteq4(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpne4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetne4(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpges4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetges4(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpgeu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetgeu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpgts4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetgts4(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpgtu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetgtu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmples4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetles4(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpleu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetleu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmplts4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetlts4(unsigned int, unsigned int);
POLYPY_D unsigned int __vcmpltu4(unsigned int, unsigned int);
POLYPY_D unsigned int __vsetltu4(unsigned int, unsigned int);
/* clock() counts the calls of clock()/clock64() the thread has made (see frontend/lower/calls.py). */
POLYPY_D long clock(void);
POLYPY_D long long clock64(void);
/* Sleeping changes nothing a kernel computes; PTX allows any duration in [0, 2 t]. */
POLYPY_D void __nanosleep(unsigned int ns);
#ifdef __cplusplus
/* A graph's conditional node's condition, set by a kernel of the graph: a store through the
 * handle (frontend/lower/calls.py, polypy/runtime/parts/graph_conditional.h). */
POLYPY_D void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);
#endif
/* Bit reinterpretation (one IR bitcast each; see frontend/lower/bitcasts.py). */
POLYPY_D int __float_as_int(float);
POLYPY_D unsigned int __float_as_uint(float);
POLYPY_D float __int_as_float(int);
POLYPY_D float __uint_as_float(unsigned int);
POLYPY_D long long __double_as_longlong(double);
POLYPY_D double __longlong_as_double(long long);
POLYPY_D int __double2hiint(double);
POLYPY_D int __double2loint(double);
POLYPY_D double __hiloint2double(int, int);

/* Device math: float and double overloads of every function (CUDA overloads the double names
 * for float in C++), the float-suffixed names and the fast intrinsics. */
#define POLYPY_MATH1(name) POLYPY_LIBC float name##f(float); POLYPY_LIBC double name(double); \
  POLYPY_LIBC float __##name##f(float);
#define POLYPY_MATH2(name) POLYPY_LIBC float name##f(float, float); POLYPY_LIBC double name(double, double); \
  POLYPY_LIBC float __##name##f(float, float);
#ifdef __cplusplus
#define POLYPY_MATH1_OVL(name) POLYPY_D float name(float);
#define POLYPY_MATH2_OVL(name) POLYPY_D float name(float, float);
#else
#define POLYPY_MATH1_OVL(name)
#define POLYPY_MATH2_OVL(name)
#endif
#define POLYPY_M1(name) POLYPY_MATH1(name) POLYPY_MATH1_OVL(name)
#define POLYPY_M2(name) POLYPY_MATH2(name) POLYPY_MATH2_OVL(name)
POLYPY_M1(exp) POLYPY_M1(exp2) POLYPY_M1(exp10) POLYPY_M1(expm1)
POLYPY_M1(log) POLYPY_M1(log2) POLYPY_M1(log10) POLYPY_M1(log1p)
POLYPY_M1(sqrt) POLYPY_M1(rsqrt) POLYPY_M1(cbrt)
POLYPY_M1(sin) POLYPY_M1(cos) POLYPY_M1(tan) POLYPY_M1(asin) POLYPY_M1(acos) POLYPY_M1(atan)
POLYPY_M1(sinh) POLYPY_M1(cosh) POLYPY_M1(tanh) POLYPY_M1(asinh) POLYPY_M1(acosh) POLYPY_M1(atanh)
POLYPY_M1(erf) POLYPY_M1(erfc) POLYPY_M1(fabs) POLYPY_M1(floor) POLYPY_M1(ceil) POLYPY_M1(trunc)
POLYPY_M1(round) POLYPY_M1(rint)
POLYPY_M2(pow) POLYPY_M2(atan2) POLYPY_M2(fmin) POLYPY_M2(fmax) POLYPY_M2(fmod) POLYPY_M2(hypot)
POLYPY_M2(copysign) POLYPY_M2(fdim)
POLYPY_LIBC void sincosf(float x, float* s, float* c);
POLYPY_LIBC void sincos(double x, double* s, double* c);
POLYPY_D void __sincosf(float x, float* s, float* c);
POLYPY_LIBC float frexpf(float, int*);
POLYPY_LIBC double frexp(double, int*);
POLYPY_LIBC float ldexpf(float, int);
POLYPY_LIBC double ldexp(double, int);
POLYPY_LIBC float modff(float, float*);
POLYPY_LIBC double modf(double, double*);
#ifdef __cplusplus
POLYPY_D float frexp(float, int*);
POLYPY_D float ldexp(float, int);
POLYPY_D float modf(float, float*);
#endif
/* More of the library (frontend/lower/more_math.py writes them in IR or refuses them by name). */
#ifdef __cplusplus
#define POLYPY_MATH_OVL(decl) POLYPY_D decl;
#else
#define POLYPY_MATH_OVL(decl)
#endif
#define POLYPY_MORE1(RF, RD, name) POLYPY_LIBC RF name##f(float); POLYPY_LIBC RD name(double); \
  POLYPY_MATH_OVL(RF name(float))
#define POLYPY_MORE2(name) POLYPY_LIBC float name##f(float, float); POLYPY_LIBC double name(double, double); \
  POLYPY_MATH_OVL(float name(float, float))
#define POLYPY_MORE3(name) POLYPY_LIBC float name##f(float, float, float); \
  POLYPY_LIBC double name(double, double, double); POLYPY_MATH_OVL(float name(float, float, float))
POLYPY_MORE2(remainder) POLYPY_MORE2(nextafter) POLYPY_MORE2(rhypot)
POLYPY_MORE3(norm3d) POLYPY_MORE3(rnorm3d)
POLYPY_MORE1(int, int, ilogb) POLYPY_MORE1(float, double, logb)
POLYPY_MORE1(long, long, lrint) POLYPY_MORE1(long long, long long, llrint)
POLYPY_MORE1(long, long, lround) POLYPY_MORE1(long long, long long, llround)
POLYPY_MORE1(float, double, nearbyint) POLYPY_MORE1(float, double, sinpi) POLYPY_MORE1(float, double, cospi)
POLYPY_MORE1(float, double, rcbrt) POLYPY_MORE1(float, double, normcdf)
POLYPY_MORE1(float, double, erfinv) POLYPY_MORE1(float, double, erfcinv) POLYPY_MORE1(float, double, erfcx)
POLYPY_MORE1(float, double, normcdfinv) POLYPY_MORE1(float, double, lgamma) POLYPY_MORE1(float, double, tgamma)
POLYPY_MORE1(float, double, j0) POLYPY_MORE1(float, double, j1) POLYPY_MORE1(float, double, y0)
POLYPY_MORE1(float, double, y1) POLYPY_MORE1(float, double, cyl_bessel_i0) POLYPY_MORE1(float, double, cyl_bessel_i1)
POLYPY_LIBC float jnf(int, float); POLYPY_LIBC double jn(int, double);
POLYPY_LIBC float ynf(int, float); POLYPY_LIBC double yn(int, double);
POLYPY_LIBC float remquof(float, float, int*); POLYPY_LIBC double remquo(double, double, int*);
POLYPY_LIBC float scalbnf(float, int); POLYPY_LIBC double scalbn(double, int);
POLYPY_LIBC float scalblnf(float, long); POLYPY_LIBC double scalbln(double, long);
POLYPY_LIBC void sincospif(float, float*, float*); POLYPY_LIBC void sincospi(double, double*, double*);
POLYPY_LIBC float norm4df(float, float, float, float); POLYPY_LIBC double norm4d(double, double, double, double);
POLYPY_LIBC float rnorm4df(float, float, float, float); POLYPY_LIBC double rnorm4d(double, double, double, double);
POLYPY_MATH_OVL(float normf(int, const float*)) POLYPY_MATH_OVL(double norm(int, const double*))
POLYPY_MATH_OVL(float rnormf(int, const float*)) POLYPY_MATH_OVL(double rnorm(int, const double*))
POLYPY_MATH_OVL(float remquo(float, float, int*)) POLYPY_MATH_OVL(float scalbn(float, int))
POLYPY_MATH_OVL(float scalbln(float, long)) POLYPY_MATH_OVL(void sincospi(float, float*, float*))
#undef POLYPY_MORE1
#undef POLYPY_MORE2
#undef POLYPY_MORE3
#undef POLYPY_MATH_OVL
/* The classification functions glibc and CUDA's headers declare (nonzero when true). */
POLYPY_LIBC int __isnanf(float); POLYPY_LIBC int __isinff(float); POLYPY_LIBC int __finitef(float);
POLYPY_LIBC int __signbitf(float); POLYPY_LIBC int __isnan(double); POLYPY_LIBC int __isinf(double);
POLYPY_LIBC int __finite(double); POLYPY_LIBC int __signbit(double);
POLYPY_LIBC float fmaf(float, float, float);
POLYPY_LIBC double fma(double, double, double);
POLYPY_D float __saturatef(float);
POLYPY_D float __fdividef(float, float);
POLYPY_D float __frsqrt_rn(float);
POLYPY_D float __fadd_rn(float, float);
POLYPY_D float __fsub_rn(float, float);
POLYPY_D float __fmul_rn(float, float);
POLYPY_D float __fdiv_rn(float, float);
POLYPY_D double __dadd_rn(double, double);
POLYPY_D double __dsub_rn(double, double);
POLYPY_D double __dmul_rn(double, double);
POLYPY_D double __ddiv_rn(double, double);
/* Byte copies and fills in device code (frontend/lower/byte_copies.py). */
#ifdef __cplusplus
extern "C" __device__ void* memcpy(void*, const void*, size_t);
extern "C" __device__ void* memset(void*, int, size_t);
#endif
/* Directed rounding (rz, ru, rd; rn where not above) and rounded conversions: the frontend maps
 * them by name (frontend/lower/rounding.py). */
#define POLYPY_ROUNDED_ARITH(m) \
  POLYPY_D float __fsqrt_##m(float); POLYPY_D float __frcp_##m(float); POLYPY_D float __fmaf_##m(float, float, float); \
  POLYPY_D double __dsqrt_##m(double); POLYPY_D double __drcp_##m(double); \
  POLYPY_D double __fma_##m(double, double, double); \
  POLYPY_D int __float2int_##m(float); POLYPY_D unsigned int __float2uint_##m(float); \
  POLYPY_D long long __float2ll_##m(float); POLYPY_D unsigned long long __float2ull_##m(float); \
  POLYPY_D int __double2int_##m(double); POLYPY_D unsigned int __double2uint_##m(double); \
  POLYPY_D long long __double2ll_##m(double); POLYPY_D unsigned long long __double2ull_##m(double); \
  POLYPY_D float __int2float_##m(int); POLYPY_D float __uint2float_##m(unsigned int); \
  POLYPY_D float __ll2float_##m(long long); POLYPY_D float __ull2float_##m(unsigned long long); \
  POLYPY_D double __ll2double_##m(long long); POLYPY_D double __ull2double_##m(unsigned long long); \
  POLYPY_D float __double2float_##m(double);
#define POLYPY_DIRECTED(m) POLYPY_ROUNDED_ARITH(m) \
  POLYPY_D float __fadd_##m(float, float); POLYPY_D float __fsub_##m(float, float); \
  POLYPY_D float __fmul_##m(float, float); POLYPY_D float __fdiv_##m(float, float); \
  POLYPY_D double __dadd_##m(double, double); POLYPY_D double __dsub_##m(double, double); \
  POLYPY_D double __dmul_##m(double, double); POLYPY_D double __ddiv_##m(double, double);
POLYPY_ROUNDED_ARITH(rn) POLYPY_DIRECTED(rz) POLYPY_DIRECTED(ru) POLYPY_DIRECTED(rd)
#ifdef __cplusplus
POLYPY_D float fma(float, float, float);
POLYPY_D float min(float, float);
POLYPY_D double min(double, double);
POLYPY_D float max(float, float);
POLYPY_D double max(double, double);
/* CUDA's mixed overloads: a float and a double compare as doubles. */
POLYPY_D double min(float, double);
POLYPY_D double min(double, float);
POLYPY_D double max(float, double);
POLYPY_D double max(double, float);
POLYPY_D float abs(float);
POLYPY_D double abs(double);
POLYPY_D bool isnan(float);
POLYPY_D bool isnan(double);
POLYPY_D bool isinf(float);
POLYPY_D bool isinf(double);
POLYPY_D bool isfinite(float);
POLYPY_D bool isfinite(double);
POLYPY_D bool signbit(float);
POLYPY_D bool signbit(double);
#endif

/* Textures and surfaces (the reference and object types are the runtime's, parts/texture.h):
 * declared only; the frontend lowers each call by name (frontend/lower/textures.py). */
#ifdef __cplusplus
template <class T, enum cudaTextureReadMode PolypyMode> static __device__ T tex1Dfetch(texture<T, 1, PolypyMode> t, int x);
template <class T, enum cudaTextureReadMode PolypyMode> static __device__ T tex1D(texture<T, 1, PolypyMode> t, float x);
template <class T, enum cudaTextureReadMode PolypyMode> static __device__ T tex2D(texture<T, 2, PolypyMode> t, float x, float y);
template <class T, enum cudaTextureReadMode PolypyMode> static __device__ T tex3D(texture<T, 3, PolypyMode> t, float x, float y, float z);
template <class T> static __device__ T tex1Dfetch(cudaTextureObject_t t, int x);
template <class T> static __device__ T tex1D(cudaTextureObject_t t, float x);
template <class T> static __device__ T tex2D(cudaTextureObject_t t, float x, float y);
template <class T> static __device__ T tex3D(cudaTextureObject_t t, float x, float y, float z);
template <class T> static __device__ T tex1DLayered(cudaTextureObject_t t, float x, int layer);
template <class T> static __device__ T tex2DLayered(cudaTextureObject_t t, float x, float y, int layer);
template <class T> static __device__ T texCubemap(cudaTextureObject_t t, float x, float y, float z);
template <class T> static __device__ T texCubemapLayered(cudaTextureObject_t t, float x, float y, float z, int layer);
template <class T> static __device__ void tex1Dfetch(T* r, cudaTextureObject_t t, int x);
template <class T> static __device__ void tex1D(T* r, cudaTextureObject_t t, float x);
template <class T> static __device__ void tex2D(T* r, cudaTextureObject_t t, float x, float y);
template <class T> static __device__ void tex3D(T* r, cudaTextureObject_t t, float x, float y, float z);
template <class T> static __device__ void tex1DLayered(T* r, cudaTextureObject_t t, float x, int layer);
template <class T> static __device__ void tex2DLayered(T* r, cudaTextureObject_t t, float x, float y, int layer);
template <class T> static __device__ void texCubemap(T* r, cudaTextureObject_t t, float x, float y, float z);
template <class T> static __device__ void texCubemapLayered(T* r, cudaTextureObject_t t, float x, float y, float z, int layer);
#define POLYPY_SURF_MODE enum cudaSurfaceBoundaryMode = cudaBoundaryModeTrap
template <class T> static __device__ T surf1Dread(cudaSurfaceObject_t s, int x, POLYPY_SURF_MODE);
template <class T> static __device__ T surf2Dread(cudaSurfaceObject_t s, int x, int y, POLYPY_SURF_MODE);
template <class T> static __device__ T surf3Dread(cudaSurfaceObject_t s, int x, int y, int z, POLYPY_SURF_MODE);
template <class T> static __device__ T surf1DLayeredread(cudaSurfaceObject_t s, int x, int layer, POLYPY_SURF_MODE);
template <class T> static __device__ T surf2DLayeredread(cudaSurfaceObject_t s, int x, int y, int layer, POLYPY_SURF_MODE);
template <class T> static __device__ void surf1Dread(T* r, cudaSurfaceObject_t s, int x, POLYPY_SURF_MODE);
template <class T> static __device__ void surf2Dread(T* r, cudaSurfaceObject_t s, int x, int y, POLYPY_SURF_MODE);
template <class T> static __device__ void surf3Dread(T* r, cudaSurfaceObject_t s, int x, int y, int z, POLYPY_SURF_MODE);
template <class T> static __device__ void surf1DLayeredread(T* r, cudaSurfaceObject_t s, int x, int layer, POLYPY_SURF_MODE);
template <class T> static __device__ void surf2DLayeredread(T* r, cudaSurfaceObject_t s, int x, int y, int layer, POLYPY_SURF_MODE);
template <class T> static __device__ void surf1Dwrite(T v, cudaSurfaceObject_t s, int x, POLYPY_SURF_MODE);
template <class T> static __device__ void surf2Dwrite(T v, cudaSurfaceObject_t s, int x, int y, POLYPY_SURF_MODE);
template <class T> static __device__ void surf3Dwrite(T v, cudaSurfaceObject_t s, int x, int y, int z, POLYPY_SURF_MODE);
template <class T> static __device__ void surf1DLayeredwrite(T v, cudaSurfaceObject_t s, int x, int layer, POLYPY_SURF_MODE);
template <class T> static __device__ void surf2DLayeredwrite(T v, cudaSurfaceObject_t s, int x, int y, int layer, POLYPY_SURF_MODE);
#undef POLYPY_SURF_MODE
#endif

/* Device printf and assert (CUDA declares both for device code; the C library's declarations
 * are host-only): the frontend maps calls of these to the IR's print and assertion statements. */
#ifdef __cplusplus
extern "C" __device__ int printf(const char* format, ...);
/* The device heap (frontend/lower/heap.py, docs/device_heap.md). */
extern "C" __device__ void* malloc(size_t);
extern "C" __device__ void free(void*);
__device__ void* operator new(size_t);
__device__ void* operator new[](size_t);
__device__ void operator delete(void*) noexcept;
__device__ void operator delete[](void*) noexcept;
__device__ void operator delete(void*, size_t) noexcept;
__device__ void operator delete[](void*, size_t) noexcept;
extern "C" __device__ __attribute__((noreturn)) void __assert_fail(const char* expr, const char* file,
                                                                    unsigned int line, const char* function);
#endif

/* The device runtime (CUDA dynamic parallelism, cuda_device_runtime_api.h): what device code may
 * call around a launch from device code (frontend/lower/launches.py maps or refuses each). */
#ifdef __cplusplus
__device__ cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
__device__ cudaError_t cudaStreamDestroy(cudaStream_t stream);
__device__ cudaError_t cudaGetLastError(void);
__device__ cudaError_t cudaPeekAtLastError(void);
__device__ cudaError_t cudaDeviceSynchronize(void);
__device__ cudaError_t cudaStreamSynchronize(cudaStream_t stream);
__device__ cudaError_t cudaMalloc(void** ptr, size_t size);
__device__ cudaError_t cudaFree(void* ptr);
__device__ void* cudaGetParameterBuffer(size_t alignment, size_t size);
__device__ cudaError_t cudaLaunchDevice(void* func, void* parameterBuffer, dim3 gridDimension, dim3 blockDimension,
                                        unsigned int sharedMemSize, cudaStream_t stream);
/* CUDA's named streams for launches from device code (driver_types.h spells them so). */
#ifndef cudaStreamTailLaunch
#define cudaStreamTailLaunch ((cudaStream_t)0x3)
#define cudaStreamFireAndForget ((cudaStream_t)0x4)
#endif
#endif

#ifdef POLYPY_TORCH_EXTENSION
/* c10::Half's and c10::BFloat16's conversions as polypy's exact rounding (polypy/runtime/torch/polypy_c10_lowp.h). */
#include <polypy_c10_lowp.h>
#endif

#undef POLYPY_D
#endif /* POLYPY_DEVICE_H */
