/* polypy's CUDA runtime on the host.
 *
 * One header, two uses: the frontend parses CUDA programs against it (instead of the CUDA
 * toolkit's headers, which a machine without a toolkit lacks), and `polypy translate` pastes
 * it into every translated whole program, where it implements the runtime API on host memory:
 * device allocations are ordinary aligned heap blocks, copies are memcpy (large ones on all cores), every launch and
 * every stream operation completes before it returns (which is one valid CUDA ordering).
 *
 * The allocation registry (polypy_rt_register / polypy_rt_find_alloc) is also valid C: kernel
 * libraries emitted with `--check-bounds` paste this header to check pointer accesses against
 * the allocation they point into. Everything else is C++ (it is what host code compiles against).
 */
#ifndef POLYPY_CUDA_RUNTIME_H
#define POLYPY_CUDA_RUNTIME_H

#include <math.h> /* nvcc's runtime brings the host math library: host code calls ceil, sqrt... without it */
#include <stddef.h>
#include <stdint.h> /* uintptr_t */
#include <stdio.h> /* POLYPY_TRACE_COPIES */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h> /* large copies and fills on all cores */
#endif
#if defined(__has_include)
#if __has_include(<unistd.h>)
#include <unistd.h> /* sysconf: the number of cores, for cudaDeviceProp */
#define POLYPY_RT_HAVE_SYSCONF 1
#endif
#if defined(__linux__) && !defined(__CUDACC__) && __has_include(<sys/mman.h>)
#include <sys/mman.h> /* madvise: large device allocations on huge pages; fresh pages faulted in at once */
#ifdef MADV_HUGEPAGE
#define POLYPY_RT_HUGE_PAGE ((size_t)2 << 20)
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels refuse it (EINVAL) and the copy faults page by page */
#endif
#define POLYPY_RT_POPULATE 1
#endif
#endif

#ifndef __host__
#define __host__
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __global__
#define __global__
#endif
#ifndef __shared__
#define __shared__
#endif
#ifndef __constant__
#define __constant__
#endif
#ifndef __managed__
#define __managed__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#ifndef __noinline__
#define __noinline__
#endif
#ifndef __restrict__
#define __restrict__ __restrict
#endif
#ifndef __align__
#define __align__(n) __attribute__((aligned(n)))
#endif
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

/* ------------------------------------------------------------------ allocation registry (C and C++) */
/* A small registry of live allocations: the emulator bridge asks it how large the block behind
 * a device pointer is, and cudaFree checks that it frees what cudaMalloc gave. */
/* The runtime's state (this registry, the last error) lives in inline functions with external
 * linkage in C++: one copy in the whole program, so translated .cu files linked together share it
 * (memory cudaMalloc'ed in one file is freed in another; checkCUDAError in util/cuda.cu sees the
 * error of a launch in another file). */
#ifdef __cplusplus
#define POLYPY_RT_STATE inline
#else
#define POLYPY_RT_STATE static inline
#endif
/* shared: the block is a host buffer a device pointer was pointed at instead of copying it
 * (polypy_rt_share_copy); taken: a host pointer took the block instead of a copy of it
 * (polypy_rt_take_copy). cudaFree forgets either without freeing it. */
struct polypy_rt_alloc { void* base; size_t size; int shared; int taken; };
POLYPY_RT_STATE struct polypy_rt_alloc** polypy_rt_table(void) { static struct polypy_rt_alloc* t = 0; return &t; }
POLYPY_RT_STATE size_t* polypy_rt_count(void) { static size_t n = 0; return &n; }
POLYPY_RT_STATE size_t* polypy_rt_capacity(void) { static size_t c = 0; return &c; }

static inline void polypy_rt_register(void* p, size_t size) {
  struct polypy_rt_alloc** table = polypy_rt_table();
  size_t* n = polypy_rt_count();
  size_t* cap = polypy_rt_capacity();
  /* An entry of host memory a device pointer became (shared or taken) at this address: the host
   * freed that memory before the pointer's cudaFree came, and the address is new memory now. */
  for (size_t i = 0; i < *n; ++i) {
    if ((*table)[i].base == p && ((*table)[i].shared || (*table)[i].taken)) {
      (*table)[i] = (*table)[*n - 1];
      --*n;
      break;
    }
  }
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 64;
    *table = (struct polypy_rt_alloc*)realloc(*table, *cap * sizeof(struct polypy_rt_alloc));
  }
  (*table)[*n].base = p;
  (*table)[*n].size = size;
  (*table)[*n].shared = 0;
  (*table)[*n].taken = 0;
  ++*n;
}

/* Forgets the allocation at p; 0 if p is not a live allocation's base. Its size goes to *size
 * (when size is not null). */
static inline int polypy_rt_unregister(void* p, size_t* size) {
  struct polypy_rt_alloc* table = *polypy_rt_table();
  size_t* n = polypy_rt_count();
  for (size_t i = 0; i < *n; ++i) {
    if (table[i].base == p) {
      if (size) *size = table[i].size;
      table[i] = table[*n - 1];
      --*n;
      return 1;
    }
  }
  return 0;
}

/* The live allocation whose base is p, or null. */
static inline struct polypy_rt_alloc* polypy_rt_entry(const void* p) {
  struct polypy_rt_alloc* table = *polypy_rt_table();
  size_t n = *polypy_rt_count();
  for (size_t i = 0; i < n; ++i)
    if (table[i].base == p) return &table[i];
  return 0;
}

/* The allocation containing p: its base and size; returns 0 if p is not device memory. */
static inline int polypy_rt_find_alloc(const void* p, void** base, size_t* size) {
  struct polypy_rt_alloc* table = *polypy_rt_table();
  size_t n = *polypy_rt_count();
  const char* q = (const char*)p;
  for (size_t i = 0; i < n; ++i) {
    const char* b = (const char*)table[i].base;
    if (q >= b && q < b + (table[i].size ? table[i].size : 1)) { *base = table[i].base; *size = table[i].size; return 1; }
  }
  return 0;
}

/* Whether a and b point into two different live allocations (a launch's written array and another
 * argument: the kernel's version with restrict pointers may run, codegen/c/apart.py). A pointer
 * the registry does not know (a __device__ array's address, host memory) is never apart. */
static inline int polypy_rt_apart(const void* a, const void* b) {
  void *base_a, *base_b;
  size_t size_a, size_b;
  return polypy_rt_find_alloc(a, &base_a, &size_a) && polypy_rt_find_alloc(b, &base_b, &size_b) && base_a != base_b;
}

#ifdef __cplusplus

/* The include guards and version of the toolkit's headers: programs' own copies of the samples'
 * helper headers test them to enable their runtime-API parts. */
#define __CUDA_RUNTIME_H__
#define __DRIVER_TYPES_H__
#define __VECTOR_TYPES_H__
#define CUDART_VERSION 12000
/* What nvcc 12.0 predefines, which its host pass sees too: polypy's frontend defines them on its
 * command line (frontend/clang_setup.py NVCC_MACROS), a translated program gets them here, after
 * the includes above (which test __CUDACC__ to tell the two apart), so that its host code takes
 * the branches the frontend read. */
#ifndef __CUDACC__
#define __CUDACC__
#endif
#ifndef __NVCC__
#define __NVCC__
#endif
#ifndef __CUDACC_VER_MAJOR__
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 0
#define __CUDACC_VER_BUILD__ 76
#endif

/* ------------------------------------------------------------------ host min/max */
/* nvcc's headers give host code min and max over the arithmetic types (the device prelude
 * declares the device ones); mixed float/double calls take the double one, as there. */
#define POLYPY_MINMAX(T) \
  static inline __host__ T min(T a, T b) { return b < a ? b : a; } \
  static inline __host__ T max(T a, T b) { return a < b ? b : a; }
POLYPY_MINMAX(int) POLYPY_MINMAX(unsigned int) POLYPY_MINMAX(long) POLYPY_MINMAX(unsigned long)
POLYPY_MINMAX(long long) POLYPY_MINMAX(unsigned long long) POLYPY_MINMAX(float) POLYPY_MINMAX(double)
#undef POLYPY_MINMAX
static inline __host__ double min(float a, double b) { return min((double)a, b); }
static inline __host__ double min(double a, float b) { return min(a, (double)b); }
static inline __host__ double max(float a, double b) { return max((double)a, b); }
static inline __host__ double max(double a, float b) { return max(a, (double)b); }
/* Mixed signedness takes the unsigned type, as CUDA's overloads do. */
#define POLYPY_MINMAX_MIXED(S, U) \
  static inline __host__ U min(S a, U b) { return min((U)a, b); } \
  static inline __host__ U min(U a, S b) { return min(a, (U)b); } \
  static inline __host__ U max(S a, U b) { return max((U)a, b); } \
  static inline __host__ U max(U a, S b) { return max(a, (U)b); }
POLYPY_MINMAX_MIXED(int, unsigned int) POLYPY_MINMAX_MIXED(long, unsigned long)
POLYPY_MINMAX_MIXED(long long, unsigned long long)
#undef POLYPY_MINMAX_MIXED

/* ------------------------------------------------------------------ vector types */
struct uint3 { unsigned int x, y, z; };
struct dim3 {
  unsigned int x, y, z;
  __host__ __device__ dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  __host__ __device__ dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  __host__ __device__ operator uint3() const { uint3 t; t.x = x; t.y = y; t.z = z; return t; }
};
#define POLYPY_DIM3_DEFINED 1  /* translated kernel files define dim3 themselves only without this header */

#define POLYPY_VEC2(T, N, A) struct __align__(A) N##2 { T x, y; }; \
  static __host__ __device__ inline N##2 make_##N##2(T x, T y) { N##2 t; t.x = x; t.y = y; return t; }
#define POLYPY_VEC3(T, N) struct N##3 { T x, y, z; }; \
  static __host__ __device__ inline N##3 make_##N##3(T x, T y, T z) { N##3 t; t.x = x; t.y = y; t.z = z; return t; }
#define POLYPY_VEC4(T, N, A) struct __align__(A) N##4 { T x, y, z, w; }; \
  static __host__ __device__ inline N##4 make_##N##4(T x, T y, T z, T w) { N##4 t; t.x = x; t.y = y; t.z = z; t.w = w; return t; }

#define POLYPY_VEC1(T, N) struct N##1 { T x; }; \
  static __host__ __device__ inline N##1 make_##N##1(T x) { N##1 t; t.x = x; return t; }
/* Every vector type of CUDA's vector_types.h, with CUDA's alignments (uint3 is above). */
POLYPY_VEC1(float, float) POLYPY_VEC2(float, float, 8) POLYPY_VEC3(float, float) POLYPY_VEC4(float, float, 16)
POLYPY_VEC1(double, double) POLYPY_VEC2(double, double, 16) POLYPY_VEC3(double, double) POLYPY_VEC4(double, double, 16)
POLYPY_VEC1(int, int) POLYPY_VEC2(int, int, 8) POLYPY_VEC3(int, int) POLYPY_VEC4(int, int, 16)
POLYPY_VEC1(unsigned int, uint) POLYPY_VEC2(unsigned int, uint, 8) POLYPY_VEC4(unsigned int, uint, 16)
POLYPY_VEC1(short, short) POLYPY_VEC2(short, short, 4) POLYPY_VEC3(short, short) POLYPY_VEC4(short, short, 8)
POLYPY_VEC1(unsigned short, ushort) POLYPY_VEC2(unsigned short, ushort, 4) POLYPY_VEC3(unsigned short, ushort)
POLYPY_VEC4(unsigned short, ushort, 8)
POLYPY_VEC1(unsigned char, uchar) POLYPY_VEC2(unsigned char, uchar, 2) POLYPY_VEC3(unsigned char, uchar)
POLYPY_VEC4(unsigned char, uchar, 4)
POLYPY_VEC1(signed char, char) POLYPY_VEC2(signed char, char, 2) POLYPY_VEC3(signed char, char)
POLYPY_VEC4(signed char, char, 4)
POLYPY_VEC1(long, long) POLYPY_VEC2(long, long, 2 * sizeof(long)) POLYPY_VEC3(long, long) POLYPY_VEC4(long, long, 16)
POLYPY_VEC1(unsigned long, ulong) POLYPY_VEC2(unsigned long, ulong, 2 * sizeof(unsigned long))
POLYPY_VEC3(unsigned long, ulong) POLYPY_VEC4(unsigned long, ulong, 16)
POLYPY_VEC1(long long, longlong) POLYPY_VEC2(long long, longlong, 16) POLYPY_VEC3(long long, longlong)
POLYPY_VEC4(long long, longlong, 16)
POLYPY_VEC1(unsigned long long, ulonglong) POLYPY_VEC2(unsigned long long, ulonglong, 16)
POLYPY_VEC3(unsigned long long, ulonglong) POLYPY_VEC4(unsigned long long, ulonglong, 16)
static __host__ __device__ inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { uint3 t; t.x = x; t.y = y; t.z = z; return t; }

/* ------------------------------------------------------------------ errors */
/* The error codes of the CUDA runtime (CUDA's numbering), with their names and messages: host
 * code prints them and switches over them. polypy itself reports only a few of them. */
#define POLYPY_CUDA_ERRORS(X) \
  X(cudaSuccess, 0, "no error") \
  X(cudaErrorInvalidValue, 1, "invalid argument") \
  X(cudaErrorMemoryAllocation, 2, "out of memory") \
  X(cudaErrorInitializationError, 3, "initialization error") \
  X(cudaErrorCudartUnloading, 4, "driver shutting down") \
  X(cudaErrorProfilerDisabled, 5, "profiler disabled while using external profiling tool") \
  X(cudaErrorProfilerNotInitialized, 6, "profiler not initialized") \
  X(cudaErrorProfilerAlreadyStarted, 7, "profiler already started") \
  X(cudaErrorProfilerAlreadyStopped, 8, "profiler already stopped") \
  X(cudaErrorInvalidConfiguration, 9, "invalid configuration argument") \
  X(cudaErrorInvalidPitchValue, 12, "invalid pitch argument") \
  X(cudaErrorInvalidSymbol, 13, "invalid device symbol") \
  X(cudaErrorInvalidHostPointer, 16, "invalid host pointer") \
  X(cudaErrorInvalidDevicePointer, 17, "invalid device pointer") \
  X(cudaErrorInvalidTexture, 18, "invalid texture reference") \
  X(cudaErrorInvalidTextureBinding, 19, "texture is not bound to a pointer") \
  X(cudaErrorInvalidChannelDescriptor, 20, "invalid channel descriptor") \
  X(cudaErrorInvalidMemcpyDirection, 21, "invalid copy direction for memcpy") \
  X(cudaErrorAddressOfConstant, 22, "invalid address of constant") \
  X(cudaErrorTextureFetchFailed, 23, "fetch from texture failed") \
  X(cudaErrorTextureNotBound, 24, "cannot fetch from a texture that is not bound") \
  X(cudaErrorSynchronizationError, 25, "incorrect use of __syncthreads()") \
  X(cudaErrorInvalidFilterSetting, 26, "linear filtering not supported for non-float type") \
  X(cudaErrorInvalidNormSetting, 27, "read as normalized float not supported for 32-bit non float type") \
  X(cudaErrorMixedDeviceExecution, 28, "device emulation mode and device execution mode cannot be mixed") \
  X(cudaErrorNotYetImplemented, 31, "function not yet implemented") \
  X(cudaErrorMemoryValueTooLarge, 32, "memory size or pointer value too large to fit in 32 bit") \
  X(cudaErrorInsufficientDriver, 35, "CUDA driver version is insufficient for CUDA runtime version") \
  X(cudaErrorInvalidSurface, 37, "invalid surface reference") \
  X(cudaErrorDuplicateVariableName, 43, "duplicate global variable looked up by string name") \
  X(cudaErrorDuplicateTextureName, 44, "duplicate texture looked up by string name") \
  X(cudaErrorDuplicateSurfaceName, 45, "duplicate surface looked up by string name") \
  X(cudaErrorDevicesUnavailable, 46, "all CUDA-capable devices are busy or unavailable") \
  X(cudaErrorIncompatibleDriverContext, 49, "incompatible driver context") \
  X(cudaErrorMissingConfiguration, 52, "__global__ function call is not configured") \
  X(cudaErrorPriorLaunchFailure, 53, "unspecified launch failure in prior launch") \
  X(cudaErrorInvalidDeviceFunction, 98, "invalid device function") \
  X(cudaErrorNoDevice, 100, "no CUDA-capable device is detected") \
  X(cudaErrorInvalidDevice, 101, "invalid device ordinal") \
  X(cudaErrorStartupFailure, 127, "device startup failure") \
  X(cudaErrorInvalidKernelImage, 200, "device kernel image is invalid") \
  X(cudaErrorMapBufferObjectFailed, 205, "mapping of buffer object failed") \
  X(cudaErrorUnmapBufferObjectFailed, 206, "unmapping of buffer object failed") \
  X(cudaErrorNoKernelImageForDevice, 209, "no kernel image is available for execution on the device") \
  X(cudaErrorECCUncorrectable, 214, "uncorrectable ECC error encountered") \
  X(cudaErrorUnsupportedLimit, 215, "limit is not supported on this architecture") \
  X(cudaErrorDeviceAlreadyInUse, 216, "exclusive-thread device already in use by a different thread") \
  X(cudaErrorSharedObjectSymbolNotFound, 302, "shared object symbol not found") \
  X(cudaErrorSharedObjectInitFailed, 303, "shared object initialization failed") \
  X(cudaErrorInvalidResourceHandle, 400, "invalid resource handle") \
  X(cudaErrorNotReady, 600, "device not ready") \
  X(cudaErrorIllegalAddress, 700, "an illegal memory access was encountered") \
  X(cudaErrorLaunchOutOfResources, 701, "too many resources requested for launch") \
  X(cudaErrorLaunchTimeout, 702, "the launch timed out and was terminated") \
  X(cudaErrorPeerAccessAlreadyEnabled, 704, "peer access is already enabled") \
  X(cudaErrorPeerAccessNotEnabled, 705, "peer access has not been enabled") \
  X(cudaErrorSetOnActiveProcess, 708, "cannot set while device is active in this process") \
  X(cudaErrorAssert, 710, "device-side assert triggered") \
  X(cudaErrorTooManyPeers, 711, "peer mapping resources exhausted") \
  X(cudaErrorHostMemoryAlreadyRegistered, 712, "part or all of the requested memory range is already mapped") \
  X(cudaErrorHostMemoryNotRegistered, 713, "pointer does not correspond to a registered memory region") \
  X(cudaErrorLaunchFailure, 719, "unspecified launch failure") \
  X(cudaErrorNotSupported, 801, "operation not supported") \
  X(cudaErrorUnknown, 999, "unknown error") \
  X(cudaErrorApiFailureBase, 10000, "api failure base")

#define POLYPY_ERROR_ENUM(name, value, message) name = value,
typedef enum cudaError { POLYPY_CUDA_ERRORS(POLYPY_ERROR_ENUM) } cudaError_t;
#undef POLYPY_ERROR_ENUM
/* The driver API's status (<cuda.h>): programs compare runtime results with CUDA_SUCCESS. */
typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101
} CUresult;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

static inline const char* cudaGetErrorString(cudaError_t e) {
#define POLYPY_ERROR_MESSAGE(name, value, message) case name: return message;
  switch (e) { POLYPY_CUDA_ERRORS(POLYPY_ERROR_MESSAGE) }
#undef POLYPY_ERROR_MESSAGE
  return "unrecognized error code";
}
static inline const char* cudaGetErrorName(cudaError_t e) {
#define POLYPY_ERROR_NAME(name, value, message) case name: return #name;
  switch (e) { POLYPY_CUDA_ERRORS(POLYPY_ERROR_NAME) }
#undef POLYPY_ERROR_NAME
  return "cudaErrorUnknown";
}

/* The last error: launches in polypy cannot fail asynchronously, so this stays cudaSuccess
 * unless an API call below reports a problem. */
POLYPY_RT_STATE cudaError_t* polypy_rt_last_error() { static cudaError_t e = cudaSuccess; return &e; }
static inline cudaError_t polypy_rt_fail(cudaError_t e) { *polypy_rt_last_error() = e; return e; }
static inline cudaError_t cudaGetLastError(void) { cudaError_t e = *polypy_rt_last_error(); *polypy_rt_last_error() = cudaSuccess; return e; }
static inline cudaError_t cudaPeekAtLastError(void) { return *polypy_rt_last_error(); }

/* Whether a launch configuration is one CUDA accepts; otherwise the launch does nothing and
 * records cudaErrorInvalidConfiguration, as on a device. */
static inline bool polypy_rt_launch_ok(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                       unsigned int by, unsigned int bz, size_t shmem_bytes) {
  bool ok = gx >= 1 && gy >= 1 && gz >= 1 && gy <= 65535 && gz <= 65535 && bx >= 1 && by >= 1 && bz >= 1 &&
            bx <= 1024 && by <= 1024 && bz <= 64 && (unsigned long long)bx * by * bz <= 1024;
  (void)shmem_bytes;  /* any size: host memory is plentiful */
  if (!ok) polypy_rt_fail(cudaErrorInvalidConfiguration);
  return ok;
}

/* ------------------------------------------------------------------ memory */
/* Freed device blocks are kept for the next cudaMalloc of the same rounded size, as the CUDA
 * driver's pool keeps them: programs that allocate and free work buffers in every iteration
 * (Rodinia streamcluster's pgain) would otherwise get fresh pages from the kernel each time and
 * pay a page fault per 4 KiB when they first touch them. Like device memory from cudaMalloc, a
 * reused block holds whatever was there. At most POLYPY_RT_CACHED blocks and
 * POLYPY_RT_CACHED_BYTES bytes are kept (a program that frees large arrays and allocates others
 * does not hold both). */
#define POLYPY_RT_CACHED 32
#define POLYPY_RT_CACHED_BYTES ((size_t)1 << 30)
struct polypy_rt_cached_block { void* base; size_t bytes; };
inline polypy_rt_cached_block* polypy_rt_cached(void) { static polypy_rt_cached_block c[POLYPY_RT_CACHED]; return c; }
inline size_t* polypy_rt_cached_count(void) { static size_t n = 0; return &n; }
inline size_t* polypy_rt_cached_bytes(void) { static size_t bytes = 0; return &bytes; }
static inline size_t polypy_rt_rounded(size_t size) { return size ? (size + 63) / 64 * 64 : 64; }

/* A new block of device memory. From 2 MiB up, on 2 MiB pages where the kernel has transparent
 * huge pages (as a GPU maps its memory in large pages): a program's first touch of its device
 * arrays (cudaMemcpy) then takes one page fault per 2 MiB instead of one per 4 KiB, and kernels
 * sweeping them miss the TLB far less (Rodinia nw, srad, hotspot: hundreds of MiB). */
static inline void* polypy_rt_device_block(size_t rounded) {
#ifdef POLYPY_RT_HUGE_PAGE
  if (rounded >= POLYPY_RT_HUGE_PAGE) {
    size_t bytes = (rounded + POLYPY_RT_HUGE_PAGE - 1) / POLYPY_RT_HUGE_PAGE * POLYPY_RT_HUGE_PAGE;
    void* q = aligned_alloc(POLYPY_RT_HUGE_PAGE, bytes);
    if (q) (void)madvise(q, bytes, MADV_HUGEPAGE);  /* advice only: 4 KiB pages where refused */
    return q;
  }
#endif
  return aligned_alloc(64, rounded);
}

static inline cudaError_t cudaMalloc(void** p, size_t size) {
  size_t rounded = polypy_rt_rounded(size);
  polypy_rt_cached_block* cached = polypy_rt_cached();
  size_t* n = polypy_rt_cached_count();
  void* q = 0;
  for (size_t i = *n; i-- > 0;) {  /* the most recently freed first: still in cache */
    if (cached[i].bytes == rounded) {
      q = cached[i].base;
      *polypy_rt_cached_bytes() -= rounded;
      cached[i] = cached[--*n];
      break;
    }
  }
  if (!q) q = polypy_rt_device_block(rounded);
  if (!q) { *p = 0; return polypy_rt_fail(cudaErrorMemoryAllocation); }
  polypy_rt_register(q, size);
  *p = q;
  return cudaSuccess;
}
template <class T> static inline cudaError_t cudaMalloc(T** p, size_t size) { return cudaMalloc((void**)p, size); }
static inline cudaError_t cudaMallocManaged(void** p, size_t size, unsigned int flags = 1) { (void)flags; return cudaMalloc(p, size); }
template <class T> static inline cudaError_t cudaMallocManaged(T** p, size_t size, unsigned int flags = 1) { return cudaMallocManaged((void**)p, size, flags); }
static inline cudaError_t cudaMallocHost(void** p, size_t size) { return cudaMalloc(p, size); }
template <class T> static inline cudaError_t cudaMallocHost(T** p, size_t size) { return cudaMalloc((void**)p, size); }

static inline cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  struct polypy_rt_alloc* entry = polypy_rt_entry(p);
  int host_owned = entry && (entry->shared || entry->taken);
  size_t size = 0;
  if (!polypy_rt_unregister(p, &size)) return polypy_rt_fail(cudaErrorInvalidDevicePointer);
  if (host_owned) return cudaSuccess;  /* the host's memory: the host frees it */
  size_t rounded = polypy_rt_rounded(size);
  size_t* n = polypy_rt_cached_count();
  size_t* bytes = polypy_rt_cached_bytes();
  if (*n < POLYPY_RT_CACHED && *bytes + rounded <= POLYPY_RT_CACHED_BYTES) {
    polypy_rt_cached()[(*n)++] = polypy_rt_cached_block{p, rounded};
    *bytes += rounded;
  } else {
    free(p);
  }
  return cudaSuccess;
}
/* Gives the kept blocks back to the C library. */
static inline void polypy_rt_release_cached(void) {
  size_t* n = polypy_rt_cached_count();
  while (*n) free(polypy_rt_cached()[--*n].base);
  *polypy_rt_cached_bytes() = 0;
}
static inline cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }

/* Pinned and mapped host memory is ordinary memory here: the device pointer of a mapped block
 * is the block itself. */
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04
#define cudaHostRegisterDefault 0x00
#define cudaHostRegisterPortable 0x01
#define cudaHostRegisterMapped 0x02
static inline cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int flags) { (void)flags; return cudaMalloc(p, size); }
template <class T> static inline cudaError_t cudaHostAlloc(T** p, size_t size, unsigned int flags) {
  return cudaHostAlloc((void**)p, size, flags);
}
static inline cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int flags) {
  (void)flags;
  *device = host;
  return cudaSuccess;
}
template <class T> static inline cudaError_t cudaHostGetDevicePointer(T** device, void* host, unsigned int flags) {
  return cudaHostGetDevicePointer((void**)device, host, flags);
}
static inline cudaError_t cudaHostRegister(void* p, size_t size, unsigned int flags) { (void)p; (void)size; (void)flags; return cudaSuccess; }
static inline cudaError_t cudaHostUnregister(void* p) { (void)p; return cudaSuccess; }

/* Pitched 2D allocations: rows padded to 64 bytes, as a device aligns them. */
static inline cudaError_t cudaMallocPitch(void** p, size_t* pitch, size_t width, size_t height) {
  *pitch = (width + 63) / 64 * 64;
  return cudaMalloc(p, *pitch * height);
}
template <class T> static inline cudaError_t cudaMallocPitch(T** p, size_t* pitch, size_t width, size_t height) {
  return cudaMallocPitch((void**)p, pitch, width, height);
}

/* ------------------------------------------------------------------ tracing what the device returns */
/* With POLYPY_TRACE_COPIES=FILE in the environment, every cudaMemcpy from device to host writes
 * what it copied to FILE, as text: a line "device-to-host copy of N TYPE", then the values, one
 * a line. The type is the destination's where the call site's pointer type says it (float*,
 * int*...), bytes otherwise. A translated run and a `polypy run --emulate` run of the same
 * program, compared number by number, check what every kernel computed for the host, also in
 * programs that print nothing of it (Rodinia gaussian). The type names hold no digits, so that
 * a reader of numbers sees only the counts and values. */
enum polypy_rt_elem { polypy_rt_bytes, polypy_rt_float, polypy_rt_double, polypy_rt_int, polypy_rt_unsigned,
                      polypy_rt_long, polypy_rt_unsigned_long, polypy_rt_short, polypy_rt_unsigned_short };
template <class T> struct polypy_rt_elem_of { static const int value = polypy_rt_bytes; };
template <> struct polypy_rt_elem_of<float> { static const int value = polypy_rt_float; };
template <> struct polypy_rt_elem_of<double> { static const int value = polypy_rt_double; };
template <> struct polypy_rt_elem_of<int> { static const int value = polypy_rt_int; };
template <> struct polypy_rt_elem_of<unsigned int> { static const int value = polypy_rt_unsigned; };
template <> struct polypy_rt_elem_of<long> { static const int value = polypy_rt_long; };
template <> struct polypy_rt_elem_of<long long> { static const int value = polypy_rt_long; };
template <> struct polypy_rt_elem_of<unsigned long> { static const int value = polypy_rt_unsigned_long; };
template <> struct polypy_rt_elem_of<unsigned long long> { static const int value = polypy_rt_unsigned_long; };
template <> struct polypy_rt_elem_of<short> { static const int value = polypy_rt_short; };
template <> struct polypy_rt_elem_of<unsigned short> { static const int value = polypy_rt_unsigned_short; };
inline FILE* polypy_rt_trace_file(void) {
  static int opened = 0;
  static FILE* f = 0;
  if (!opened) {
    opened = 1;
    const char* path = getenv("POLYPY_TRACE_COPIES");
    if (path && *path) f = fopen(path, "w");
  }
  return f;
}
static inline void polypy_rt_trace_copy(const void* p, size_t count, int elem, size_t elem_size) {
  FILE* f = polypy_rt_trace_file();
  if (!f) return;
  if (elem == polypy_rt_bytes || count % elem_size) elem = polypy_rt_bytes, elem_size = 1;
  static const char* const names[] = {"bytes", "float", "double", "int", "unsigned", "long", "unsigned long",
                                      "short", "unsigned short"};
  size_t n = count / elem_size;
  fprintf(f, "device-to-host copy of %zu %s\n", n, names[elem]);
  for (size_t i = 0; i < n; ++i) {
    switch (elem) {
      case polypy_rt_float: fprintf(f, "%.9g\n", (double)((const float*)p)[i]); break;
      case polypy_rt_double: fprintf(f, "%.17g\n", ((const double*)p)[i]); break;
      case polypy_rt_int: fprintf(f, "%d\n", ((const int*)p)[i]); break;
      case polypy_rt_unsigned: fprintf(f, "%u\n", ((const unsigned*)p)[i]); break;
      case polypy_rt_long:
        fprintf(f, "%lld\n", elem_size == sizeof(long) ? (long long)((const long*)p)[i] : ((const long long*)p)[i]);
        break;
      case polypy_rt_unsigned_long:
        fprintf(f, "%llu\n", elem_size == sizeof(unsigned long) ? (unsigned long long)((const unsigned long*)p)[i]
                                                                  : ((const unsigned long long*)p)[i]);
        break;
      case polypy_rt_short: fprintf(f, "%d\n", ((const short*)p)[i]); break;
      case polypy_rt_unsigned_short: fprintf(f, "%u\n", ((const unsigned short*)p)[i]); break;
      default: fprintf(f, "%u\n", ((const unsigned char*)p)[i]); break;
    }
  }
  fflush(f);
}

/* Large copies and fills run on all cores, each core one contiguous share of 2 MiB pieces (as a
 * GPU's copy engines move a transfer in parallel): the first copy into a new device array, or out
 * of it into a new host array, is mostly the kernel clearing fresh pages, and each core clears its
 * own share. Overlapping ranges (memmove's case), small sizes and calls from inside a parallel
 * region take one thread.
 *
 * A device block on huge pages gets them at its first touch, normally in a tenth of a millisecond
 * per 2 MiB; where the kernel must first compact memory to find one, it takes 4-5 ms (measured on
 * the bench machine: a 400 MiB copy took 32 ms or 820 ms depending on the state of free memory).
 * The first piece of a share that takes longer than POLYPY_RT_SLOW_PIECE_MS turns huge pages off
 * for the rest of that share: the program keeps its 4 KiB pages instead of waiting. */
#define POLYPY_RT_PARALLEL_BYTES ((size_t)8 << 20)
#define POLYPY_RT_PIECE_BYTES ((size_t)2 << 20)
#define POLYPY_RT_SLOW_PIECE_MS 1.5
static inline double polypy_rt_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}
/* Whether dst starts a range inside a device block large enough for huge pages. */
static inline int polypy_rt_on_huge_pages(const void* dst) {
#ifdef POLYPY_RT_HUGE_PAGE
  void* base = 0;
  size_t size = 0;
  return polypy_rt_find_alloc(dst, &base, &size) && polypy_rt_rounded(size) >= POLYPY_RT_HUGE_PAGE &&
         !polypy_rt_entry(base)->shared;
#else
  (void)dst;
  return 0;
#endif
}
/* A copy or fill about to write all of [d, d + len): where the range starts on a page the process
 * has never touched (mincore: not resident), its pages are faulted in by one madvise call
 * (MADV_POPULATE_WRITE) before the copy writes them. The kernel still clears each page, but the
 * copy no longer stops at a page fault every 4 KiB: the first copy of a 64 MiB array into fresh
 * memory measured 26 ms instead of 36 ms on the bench machine, one core. Only whole pages inside
 * the range are populated, and populating writes nothing: the contents are what they would have
 * been. Pages already there cost one mincore call per piece. */
#define POLYPY_RT_POPULATE_BYTES ((size_t)256 << 10)
static inline void polypy_rt_populate(char* d, size_t len) {
#ifdef POLYPY_RT_POPULATE
#ifdef POLYPY_RT_HAVE_SYSCONF
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
#else
  const uintptr_t page = 4096;
#endif
  uintptr_t from = ((uintptr_t)d + page - 1) & ~(page - 1);
  uintptr_t to = ((uintptr_t)d + len) & ~(page - 1);
  if (len < POLYPY_RT_POPULATE_BYTES || from >= to) return;
  unsigned char resident = 1;
  if (mincore((void*)from, page, &resident) != 0 || (resident & 1)) return;
  (void)madvise((void*)from, to - from, MADV_POPULATE_WRITE);
#else
  (void)d;
  (void)len;
#endif
}
/* memcpy(dst, src, count), or memset(dst, value, count) where src is null, as described above. */
static inline void polypy_rt_fill_bytes(void* dst, const void* src, int value, size_t count) {
  char* d = (char*)dst;
  const char* s = (const char*)src;
  if (s && d < s + count && s < d + count) {
    memmove(dst, src, count);
    return;
  }
  int spread = 0;
#ifdef _OPENMP
  spread = count >= POLYPY_RT_PARALLEL_BYTES && !omp_in_parallel() && omp_get_max_threads() > 1;
#endif
  int huge = count >= POLYPY_RT_PIECE_BYTES && polypy_rt_on_huge_pages(dst);
  if (!spread && !huge) {
    polypy_rt_populate(d, count);
    if (s) memcpy(dst, src, count);
    else memset(dst, value, count);
    return;
  }
  size_t pieces = (count + POLYPY_RT_PIECE_BYTES - 1) / POLYPY_RT_PIECE_BYTES;
#pragma omp parallel if (spread)
  {
    size_t me = 0, team = 1;
#ifdef _OPENMP
    me = (size_t)omp_get_thread_num();
    team = (size_t)omp_get_num_threads();
#endif
    size_t lo = pieces * me / team, hi = pieces * (me + 1) / team;
    size_t end = hi * POLYPY_RT_PIECE_BYTES < count ? hi * POLYPY_RT_PIECE_BYTES : count;
    int watch = huge;
    for (size_t i = lo; i < hi; ++i) {
      size_t at = i * POLYPY_RT_PIECE_BYTES;
      size_t len = count - at < POLYPY_RT_PIECE_BYTES ? count - at : POLYPY_RT_PIECE_BYTES;
      double start = watch ? polypy_rt_now_ms() : 0.0;
      polypy_rt_populate(d + at, len);
      if (s) memcpy(d + at, s + at, len);
      else memset(d + at, value, len);
      (void)start;
#ifdef POLYPY_RT_HUGE_PAGE
      if (watch && polypy_rt_now_ms() - start > POLYPY_RT_SLOW_PIECE_MS) {
        uintptr_t from = ((uintptr_t)(d + at + len) + POLYPY_RT_HUGE_PAGE - 1) & ~(uintptr_t)(POLYPY_RT_HUGE_PAGE - 1);
        uintptr_t to = (uintptr_t)(d + end) & ~(uintptr_t)(POLYPY_RT_HUGE_PAGE - 1);
        if (from < to) (void)madvise((void*)from, to - from, MADV_NOHUGEPAGE);
        watch = 0;
      }
#endif
    }
  }
}

static inline cudaError_t polypy_rt_memcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                           int elem, size_t elem_size) {
  if ((int)kind < 0 || (int)kind > 4) return polypy_rt_fail(cudaErrorInvalidMemcpyDirection);
  if (count) polypy_rt_fill_bytes(dst, src, 0, count);
  if (kind == cudaMemcpyDeviceToHost) polypy_rt_trace_copy(dst, count, elem, elem_size);
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  return polypy_rt_memcpy(dst, src, count, kind, polypy_rt_bytes, 1);
}
/* cudaMemcpy(*device, host, count, cudaMemcpyHostToDevice) where polypy proved that the program
 * cannot tell the device array from the host buffer (frontend/host_copies.py: the host never
 * writes the buffer after the copy, and never reads it once the device array is written): the
 * device pointer becomes the buffer itself, and the fresh block goes back to the pool unused. The
 * copy and the clearing of the block's new pages are saved (Rodinia nw: two 64 MiB arrays).
 * Still checked here: *device must be a block cudaMalloc gave, of exactly count bytes, and host
 * no device memory; otherwise this is the copy. */
static inline cudaError_t polypy_rt_share_copy(void** device, const void* host, size_t count) {
  struct polypy_rt_alloc* entry = polypy_rt_entry(*device);
  void* base = 0;
  size_t size = 0;
  if (!entry || entry->shared || entry->size != count || !host || polypy_rt_find_alloc(host, &base, &size))
    return cudaMemcpy(*device, host, count, cudaMemcpyHostToDevice);
  cudaFree(*device);
  polypy_rt_register((void*)host, count);
  polypy_rt_entry(host)->shared = 1;
  *device = (void*)host;
  return cudaSuccess;
}

/* Host blocks a device block may replace (polypy_rt_take_copy): the blocks of the host pointers
 * frontend/host_copies.py found to take a device array's memory (their malloc or calloc becomes
 * polypy_rt_host_malloc or _calloc, which records the size), and memory that has two owners
 * after a take (a host buffer a device array became, then taken by a second host pointer: both
 * free calls become polypy_rt_host_free, and the second frees it). */
struct polypy_rt_host_block { void* base; size_t size; int owners; };
inline polypy_rt_host_block** polypy_rt_host_table(void) { static polypy_rt_host_block* t = 0; return &t; }
inline size_t* polypy_rt_host_count(void) { static size_t n = 0; return &n; }
inline size_t* polypy_rt_host_capacity(void) { static size_t c = 0; return &c; }
static inline polypy_rt_host_block* polypy_rt_host_find(const void* p) {
  polypy_rt_host_block* t = *polypy_rt_host_table();
  for (size_t i = 0, n = *polypy_rt_host_count(); i < n; ++i)
    if (t[i].base == p) return &t[i];
  return 0;
}
static inline void polypy_rt_host_add(void* p, size_t size, int owners) {
  size_t* n = polypy_rt_host_count();
  size_t* cap = polypy_rt_host_capacity();
  if (*n == *cap) {
    size_t grown = *cap ? 2 * *cap : 16;
    polypy_rt_host_block* t = (polypy_rt_host_block*)realloc(*polypy_rt_host_table(), grown * sizeof(polypy_rt_host_block));
    if (!t) return;  /* not recorded: a later take of this block copies instead */
    *polypy_rt_host_table() = t;
    *cap = grown;
  }
  (*polypy_rt_host_table())[(*n)++] = polypy_rt_host_block{p, size, owners};
}
static inline void polypy_rt_host_forget(polypy_rt_host_block* b) {
  size_t* n = polypy_rt_host_count();
  *b = (*polypy_rt_host_table())[--*n];
}
static inline void* polypy_rt_host_malloc(size_t size) {
  void* p = malloc(size);
  if (p) polypy_rt_host_add(p, size, 1);
  return p;
}
static inline void* polypy_rt_host_calloc(size_t count, size_t size) {
  void* p = calloc(count, size);
  if (p) polypy_rt_host_add(p, count * size, 1);
  return p;
}
/* free(p) for a pointer that may share its memory with another owner. */
static inline void polypy_rt_host_free(void* p) {
  polypy_rt_host_block* b = p ? polypy_rt_host_find(p) : 0;
  if (b) {
    if (--b->owners > 0) return;
    polypy_rt_host_forget(b);
  }
  free(p);  /* a device pointer still naming the memory keeps its entry until its cudaFree */
}
/* cudaMemcpy(*host, device, count, cudaMemcpyDeviceToHost) where polypy proved that nothing uses
 * the device array after the copy but cudaFree, and that the host block is untouched since its
 * polypy_rt_host_malloc (frontend/host_copies.py): the host pointer takes the device block, and
 * its own block is freed unused. The copy and the clearing of the host block's fresh pages are
 * saved (Rodinia nw: its 64 MiB result). Still checked here: the host block is one
 * polypy_rt_host_malloc gave, the device block one cudaMalloc gave or a host buffer it became
 * (polypy_rt_share_copy), both of exactly count bytes; otherwise this is the copy. The
 * POLYPY_TRACE_COPIES trace records the values as for a copy. */
static inline cudaError_t polypy_rt_take_copy_bytes(void** host, const void* device, size_t count, int elem,
                                                    size_t elem_size) {
  polypy_rt_host_block* b = *host ? polypy_rt_host_find(*host) : 0;
  struct polypy_rt_alloc* entry = polypy_rt_entry(device);
  if (!b || b->size != count || b->owners != 1 || !entry || entry->size != count || entry->taken ||
      polypy_rt_host_find(device))
    return polypy_rt_memcpy(*host, device, count, cudaMemcpyDeviceToHost, elem, elem_size);
  polypy_rt_host_forget(b);
  free(*host);
  /* A shared block is the host buffer's memory: it and this pointer free it, the second call frees.
   * (The entry takes the slot just forgotten: recording it cannot fail.) */
  polypy_rt_host_add((void*)device, count, entry->shared ? 2 : 1);
  entry->taken = 1;
  *host = (void*)device;
  polypy_rt_trace_copy(device, count, elem, elem_size);
  return cudaSuccess;
}
template <class T> static inline cudaError_t polypy_rt_take_copy(T** host, const void* device, size_t count) {
  return polypy_rt_take_copy_bytes((void**)host, device, count, polypy_rt_elem_of<T>::value, sizeof(T));
}
static inline cudaError_t polypy_rt_take_copy(void** host, const void* device, size_t count) {
  return polypy_rt_take_copy_bytes(host, device, count, polypy_rt_bytes, 1);
}

/* A destination of one of the scalar types above (float* ...): the trace knows its element type.
 * Other pointers (structs, incomplete types, char) take the untyped overload. */
template <bool B> struct polypy_rt_enable_if {};
template <> struct polypy_rt_enable_if<true> { typedef int type; };
template <class T>
static inline cudaError_t cudaMemcpy(T* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                     typename polypy_rt_enable_if<polypy_rt_elem_of<T>::value != polypy_rt_bytes>::type = 0) {
  return polypy_rt_memcpy((void*)dst, src, count, kind, polypy_rt_elem_of<T>::value, sizeof(T));
}
static inline cudaError_t cudaMemset(void* dst, int value, size_t count) { if (count) polypy_rt_fill_bytes(dst, 0, value, count); return cudaSuccess; }
static inline cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                       size_t height, enum cudaMemcpyKind kind) {
  if (width > dpitch || width > spitch) return polypy_rt_fail(cudaErrorInvalidPitchValue);
  for (size_t row = 0; row < height; ++row) {
    cudaError_t e = cudaMemcpy((char*)dst + row * dpitch, (const char*)src + row * spitch, width, kind);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}
static inline cudaError_t cudaMemset2D(void* dst, size_t pitch, int value, size_t width, size_t height) {
  for (size_t row = 0; row < height; ++row) memset((char*)dst + row * pitch, value, width);
  return cudaSuccess;
}

/* Free and total "device" memory: the machine's, less what the program holds in cudaMalloc. */
static inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  size_t total = (size_t)1 << 34, used = 0;
  for (size_t i = 0; i < *polypy_rt_count(); ++i) used += (*polypy_rt_table())[i].size;
  *total_bytes = total;
  *free_bytes = used < total ? total - used : 0;
  return cudaSuccess;
}

template <class T>
static inline cudaError_t cudaMemcpyToSymbol(T& symbol, const void* src, size_t count, size_t offset = 0,
                                             enum cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  (void)kind;
  memcpy((char*)&symbol + offset, src, count);
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                               enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
  (void)kind;
  memcpy(dst, (const char*)&symbol + offset, count);
  return cudaSuccess;
}

/* ------------------------------------------------------------------ streams and events */
/* Every operation completes before it returns, so streams keep their order trivially (they are
 * one stream) and events record the wall time at which the work before them had finished. */
typedef struct polypy_rt_stream* cudaStream_t;
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
typedef struct polypy_rt_event { double ms; }* cudaEvent_t;

static inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = (cudaStream_t)0; return cudaSuccess; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) { (void)s; return cudaSuccess; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return cudaSuccess; }
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) { (void)flags; return cudaStreamCreate(s); }
static inline cudaError_t cudaStreamQuery(cudaStream_t s) { (void)s; return cudaSuccess; }
static inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t s = 0) { (void)s; return cudaMemcpy(dst, src, count, kind); }
static inline cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t s = 0) { (void)s; return cudaMemset(dst, value, count); }

static inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = (cudaEvent_t)malloc(sizeof(struct polypy_rt_event)); (*e)->ms = 0; return cudaSuccess; }
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0) { (void)s; e->ms = polypy_rt_now_ms(); return cudaSuccess; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e) { (void)e; return cudaSuccess; }
static inline cudaError_t cudaEventQuery(cudaEvent_t e) { (void)e; return cudaSuccess; }
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) { (void)flags; return cudaEventCreate(e); }
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags = 0) {
  (void)s; (void)e; (void)flags;
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaMemcpyToSymbolAsync(T& symbol, const void* src, size_t count, size_t offset = 0,
                                                  enum cudaMemcpyKind kind = cudaMemcpyHostToDevice, cudaStream_t s = 0) {
  (void)s;
  return cudaMemcpyToSymbol(symbol, src, count, offset, kind);
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                                    enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost, cudaStream_t s = 0) {
  (void)s;
  return cudaMemcpyFromSymbol(dst, symbol, count, offset, kind);
}
static inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) { *ms = (float)(end->ms - start->ms); return cudaSuccess; }

/* ------------------------------------------------------------------ device management */
/* One device: the CPU. Its properties are those of a recent GPU where programs size their work
 * by them (warp size, block limits), and the machine's where they describe it (memory, cores). */
enum cudaComputeMode {
  cudaComputeModeDefault = 0,
  cudaComputeModeExclusive = 1,
  cudaComputeModeProhibited = 2,
  cudaComputeModeExclusiveProcess = 3
};
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  size_t totalConstMem;
  int major, minor;
  size_t textureAlignment;
  size_t texturePitchAlignment;
  int deviceOverlap;
  int multiProcessorCount;
  int kernelExecTimeoutEnabled;
  int integrated;
  int canMapHostMemory;
  int computeMode;
  int concurrentKernels;
  int ECCEnabled;
  int pciBusID, pciDeviceID, pciDomainID;
  int asyncEngineCount;
  int unifiedAddressing;
  int memoryClockRate;
  int memoryBusWidth;
  int l2CacheSize;
  int maxThreadsPerMultiProcessor;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  int managedMemory;
  int isMultiGpuBoard;
  size_t sharedMemPerBlockOptin;
};
static inline cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* p, int device) {
  (void)device;
  memset(p, 0, sizeof *p);
  strcpy(p->name, "polypy CPU");
  p->totalGlobalMem = (size_t)1 << 34;
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerBlockOptin = 48 * 1024;
  p->sharedMemPerMultiprocessor = 96 * 1024;
  p->regsPerBlock = p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->memPitch = (size_t)1 << 31;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsPerMultiProcessor = 2048;
  p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
  p->clockRate = 1000000; /* kHz */
  p->memoryClockRate = 1000000;
  p->memoryBusWidth = 64;
  p->totalConstMem = 64 * 1024;
  p->textureAlignment = 512;
  p->texturePitchAlignment = 32;
  p->deviceOverlap = 1;
  p->asyncEngineCount = 1;
  p->concurrentKernels = 1;
  p->canMapHostMemory = 1;
  p->unifiedAddressing = 1;
  p->managedMemory = 1;
  p->integrated = 1; /* the "device" shares the host's memory */
  p->computeMode = cudaComputeModeDefault;
  p->l2CacheSize = 4 << 20;
  p->multiProcessorCount = 1;
#ifdef POLYPY_RT_HAVE_SYSCONF
  if (sysconf(_SC_NPROCESSORS_ONLN) > 1) p->multiProcessorCount = (int)sysconf(_SC_NPROCESSORS_ONLN);
#endif
  p->major = 8; p->minor = 0;
  return cudaSuccess;
}
static inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
/* Any device number selects the one device (multi-GPU programs pick devices by number). */
static inline cudaError_t cudaSetDevice(int d) { (void)d; return cudaSuccess; }
static inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
static inline cudaError_t cudaChooseDevice(int* d, const struct cudaDeviceProp* p) { (void)p; *d = 0; return cudaSuccess; }
#define cudaDeviceScheduleAuto 0x00
#define cudaDeviceScheduleSpin 0x01
#define cudaDeviceScheduleYield 0x02
#define cudaDeviceScheduleBlockingSync 0x04
#define cudaDeviceMapHost 0x08
static inline cudaError_t cudaSetDeviceFlags(unsigned int flags) { (void)flags; return cudaSuccess; }
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
static inline cudaError_t cudaDeviceReset(void) { polypy_rt_release_cached(); return cudaSuccess; }
static inline cudaError_t cudaThreadSynchronize(void) { return cudaSuccess; }
static inline cudaError_t cudaThreadExit(void) { return cudaSuccess; }
static inline cudaError_t cudaDriverGetVersion(int* v) { *v = 12000; return cudaSuccess; }
static inline cudaError_t cudaRuntimeGetVersion(int* v) { *v = 12000; return cudaSuccess; }

/* ------------------------------------------------------------------ the driver API's device queries */
/* What programs ask the driver before they use the runtime API (Rodinia mummergpu's
 * CUT_DEVICE_INIT_DRV and cuMemGetInfo): one device, as the runtime API above describes it. Modules,
 * contexts of their own and driver-API launches are not translated: each is refused where it is
 * called, by name. */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
inline int* polypy_rt_driver_ready(void) { static int ready = 0; return &ready; }
/* What every device query checks first: cuInit was called, the device is the one device. */
static inline CUresult polypy_rt_driver_check(CUdevice device) {
  if (!*polypy_rt_driver_ready()) return CUDA_ERROR_NOT_INITIALIZED;
  return device == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
static inline CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *polypy_rt_driver_ready() = 1;
  return CUDA_SUCCESS;
}
static inline CUresult cuDriverGetVersion(int* v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = 12000;
  return CUDA_SUCCESS;
}
static inline CUresult cuDeviceGetCount(int* count) {
  CUresult e = polypy_rt_driver_check(0);
  if (e != CUDA_SUCCESS) return e;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}
static inline CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  CUresult e = polypy_rt_driver_check(ordinal);
  if (e != CUDA_SUCCESS) return e;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}
static inline CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice device) {
  CUresult e = polypy_rt_driver_check(device);
  if (e != CUDA_SUCCESS) return e;
  if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
  struct cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  *major = p.major;
  *minor = p.minor;
  return CUDA_SUCCESS;
}
static inline CUresult cuDeviceGetName(char* name, int len, CUdevice device) {
  CUresult e = polypy_rt_driver_check(device);
  if (e != CUDA_SUCCESS) return e;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  struct cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  strncpy(name, p.name, (size_t)len - 1);
  name[len - 1] = 0;
  return CUDA_SUCCESS;
}
static inline CUresult cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  CUresult e = polypy_rt_driver_check(device);
  if (e != CUDA_SUCCESS) return e;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  size_t free_bytes;
  cudaMemGetInfo(&free_bytes, bytes);
  return CUDA_SUCCESS;
}
static inline CUresult cuMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  CUresult e = polypy_rt_driver_check(0);
  if (e != CUDA_SUCCESS) return e;
  if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
  cudaMemGetInfo(free_bytes, total_bytes);
  return CUDA_SUCCESS;
}
static inline CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
#define POLYPY_DRIVER_REFUSED(what) __attribute__((unavailable(what " is not supported by polypy (CUDA driver API)")))
CUresult cuCtxCreate(...) POLYPY_DRIVER_REFUSED("cuCtxCreate");
CUresult cuModuleLoad(...) POLYPY_DRIVER_REFUSED("cuModuleLoad");
CUresult cuModuleLoadData(...) POLYPY_DRIVER_REFUSED("cuModuleLoadData");
CUresult cuModuleGetFunction(...) POLYPY_DRIVER_REFUSED("cuModuleGetFunction");
CUresult cuLaunchKernel(...) POLYPY_DRIVER_REFUSED("cuLaunchKernel");
CUresult cuMemAlloc(...) POLYPY_DRIVER_REFUSED("cuMemAlloc");
CUresult cuMemcpyHtoD(...) POLYPY_DRIVER_REFUSED("cuMemcpyHtoD");
CUresult cuMemcpyDtoH(...) POLYPY_DRIVER_REFUSED("cuMemcpyDtoH");

/* Cache and shared-memory preferences: nothing to configure on a CPU. The per-kernel ones are
 * macros: they name the kernel, which a translated program has no function of that name for
 * (its launchers have their own names), and any template instance works the same. */
enum cudaFuncCache {
  cudaFuncCachePreferNone = 0,
  cudaFuncCachePreferShared = 1,
  cudaFuncCachePreferL1 = 2,
  cudaFuncCachePreferEqual = 3
};
enum cudaSharedMemConfig {
  cudaSharedMemBankSizeDefault = 0,
  cudaSharedMemBankSizeFourByte = 1,
  cudaSharedMemBankSizeEightByte = 2
};
enum cudaLimit { cudaLimitStackSize = 0, cudaLimitPrintfFifoSize = 1, cudaLimitMallocHeapSize = 2 };
#define cudaFuncSetCacheConfig(func, config) ((void)(config), cudaSuccess)
#define cudaFuncSetSharedMemConfig(func, config) ((void)(config), cudaSuccess)
#define cudaFuncSetAttribute(func, attribute, value) ((void)(value), cudaSuccess)
static inline cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache c) { (void)c; return cudaSuccess; }
static inline cudaError_t cudaThreadSetCacheConfig(enum cudaFuncCache c) { (void)c; return cudaSuccess; }
static inline cudaError_t cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig c) { (void)c; return cudaSuccess; }
static inline cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value) { (void)limit; (void)value; return cudaSuccess; }
static inline cudaError_t cudaDeviceGetLimit(size_t* value, enum cudaLimit limit) {
  *value = limit == cudaLimitStackSize ? 1024 : (size_t)8 << 20;
  return cudaSuccess;
}

/* Texture references bound to linear device memory. A kernel's tex1Dfetch(t, i) reads the bound
 * buffer; polypy passes `t`'s binding to the kernel as a hidden argument (a plain pointer). The
 * reference keeps what cudaBindTexture gave it. CUDA arrays, 2-D textures and texture objects are
 * refused (by the frontend in device code, by these declarations in host code). */
enum cudaTextureReadMode { cudaReadModeElementType = 0, cudaReadModeNormalizedFloat = 1 };
enum cudaTextureFilterMode { cudaFilterModePoint = 0, cudaFilterModeLinear = 1 };
enum cudaTextureAddressMode { cudaAddressModeWrap = 0, cudaAddressModeClamp = 1, cudaAddressModeMirror = 2,
                              cudaAddressModeBorder = 3 };
enum cudaChannelFormatKind { cudaChannelFormatKindSigned = 0, cudaChannelFormatKindUnsigned = 1,
                             cudaChannelFormatKindFloat = 2, cudaChannelFormatKindNone = 3 };
struct cudaChannelFormatDesc { int x, y, z, w; enum cudaChannelFormatKind f; };
template <class T> static inline cudaChannelFormatDesc cudaCreateChannelDesc(void) {
  cudaChannelFormatDesc d = {(int)(8 * sizeof(T)), 0, 0, 0, cudaChannelFormatKindFloat};
  return d;
}
static inline cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f) {
  cudaChannelFormatDesc d = {x, y, z, w, f};
  return d;
}
struct textureReference {
  int normalized;
  enum cudaTextureFilterMode filterMode;
  enum cudaTextureAddressMode addressMode[3];
  struct cudaChannelFormatDesc channelDesc;
  const void* polypy_ptr; /* the bound device memory */
};
template <class T, int dim = 1, enum cudaTextureReadMode mode = cudaReadModeElementType>
struct texture : textureReference {
  texture() { normalized = 0; filterMode = cudaFilterModePoint; polypy_ptr = 0; }
};
static inline cudaError_t cudaBindTexture(size_t* offset, const struct textureReference* tex, const void* devPtr,
                                          const struct cudaChannelFormatDesc* desc, size_t size = ~(size_t)0) {
  (void)desc; (void)size;
  if (offset) *offset = 0;
  ((struct textureReference*)tex)->polypy_ptr = devPtr;
  return cudaSuccess;
}
template <class T, int dim, enum cudaTextureReadMode mode>
static inline cudaError_t cudaBindTexture(size_t* offset, const texture<T, dim, mode>& tex, const void* devPtr,
                                          size_t size = ~(size_t)0) {
  return cudaBindTexture(offset, &tex, devPtr, &tex.channelDesc, size);
}
template <class T, int dim, enum cudaTextureReadMode mode>
static inline cudaError_t cudaBindTexture(size_t* offset, const texture<T, dim, mode>& tex, const void* devPtr,
                                          const struct cudaChannelFormatDesc& desc, size_t size = ~(size_t)0) {
  return cudaBindTexture(offset, &tex, devPtr, &desc, size);
}
static inline cudaError_t cudaUnbindTexture(const struct textureReference* tex) {
  ((struct textureReference*)tex)->polypy_ptr = 0;
  return cudaSuccess;
}
template <class T, int dim, enum cudaTextureReadMode mode>
static inline cudaError_t cudaUnbindTexture(const texture<T, dim, mode>& tex) { return cudaUnbindTexture(&tex); }
#define POLYPY_TEXTURE_REFUSED(what) __attribute__((unavailable(what " are not supported by polypy")))
struct cudaArray;
typedef struct cudaArray* cudaArray_t;
typedef unsigned long long cudaTextureObject_t;
cudaError_t cudaBindTexture2D(...) POLYPY_TEXTURE_REFUSED("2-D textures (cudaBindTexture2D)");
cudaError_t cudaBindTextureToArray(...) POLYPY_TEXTURE_REFUSED("textures bound to CUDA arrays");
cudaError_t cudaMallocArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMallocArray)");
cudaError_t cudaMalloc3DArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMalloc3DArray)");
cudaError_t cudaMemcpyToArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMemcpyToArray)");
cudaError_t cudaMemcpy2DToArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMemcpy2DToArray)");
cudaError_t cudaMemcpyFromArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMemcpyFromArray)");
cudaError_t cudaMemcpy2DFromArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMemcpy2DFromArray)");
cudaError_t cudaMemcpyArrayToArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMemcpyArrayToArray)");
cudaError_t cudaFreeArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaFreeArray)");
cudaError_t cudaCreateTextureObject(...) POLYPY_TEXTURE_REFUSED("texture objects (cudaCreateTextureObject)");
cudaError_t cudaDestroyTextureObject(...) POLYPY_TEXTURE_REFUSED("texture objects (cudaDestroyTextureObject)");

/* ------------------------------------------------------------------ the runtime API for plain C files */
/* A program's .c files call the runtime too (b+tree's main.c: cudaSetDevice), linked against
 * libcudart with nvcc. Each translated file defines the common entry points with C linkage under
 * their C names (weak: every translated file of a program may define them; the functions above
 * keep their C++ names, so the two do not collide). */
#define POLYPY_RT_C_ENTRY(ret, name, params, args) \
  extern "C" __attribute__((weak, used)) ret polypy_c_##name params __asm__(#name); \
  extern "C" __attribute__((weak, used)) ret polypy_c_##name params { return name args; }
POLYPY_RT_C_ENTRY(cudaError_t, cudaSetDevice, (int d), (d))
POLYPY_RT_C_ENTRY(cudaError_t, cudaGetDevice, (int* d), (d))
POLYPY_RT_C_ENTRY(cudaError_t, cudaGetDeviceCount, (int* count), (count))
POLYPY_RT_C_ENTRY(cudaError_t, cudaDeviceSynchronize, (void), ())
POLYPY_RT_C_ENTRY(cudaError_t, cudaThreadSynchronize, (void), ())
POLYPY_RT_C_ENTRY(cudaError_t, cudaDeviceReset, (void), ())
POLYPY_RT_C_ENTRY(cudaError_t, cudaThreadExit, (void), ())
POLYPY_RT_C_ENTRY(cudaError_t, cudaMalloc, (void** p, size_t size), (p, size))
POLYPY_RT_C_ENTRY(cudaError_t, cudaFree, (void* p), (p))
POLYPY_RT_C_ENTRY(cudaError_t, cudaMemcpy, (void* dst, const void* src, size_t count, enum cudaMemcpyKind kind),
                  (dst, src, count, kind))
POLYPY_RT_C_ENTRY(cudaError_t, cudaMemset, (void* dst, int value, size_t count), (dst, value, count))
POLYPY_RT_C_ENTRY(cudaError_t, cudaGetLastError, (void), ())
POLYPY_RT_C_ENTRY(cudaError_t, cudaPeekAtLastError, (void), ())
POLYPY_RT_C_ENTRY(const char*, cudaGetErrorString, (cudaError_t e), (e))
#undef POLYPY_RT_C_ENTRY

#endif /* __cplusplus */

#endif /* POLYPY_CUDA_RUNTIME_H */
