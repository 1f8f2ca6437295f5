/* polypy's CUDA runtime on the host.
 *
 * One header, two uses: the frontend parses CUDA programs against it (instead of the CUDA
 * toolkit's headers, which a machine without a toolkit lacks), and `polypy translate` pastes
 * it into every translated whole program, where it implements the runtime API on host memory:
 * device allocations are ordinary aligned heap blocks, copies are memcpy, every launch and
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
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
struct polypy_rt_alloc { void* base; size_t size; };
static inline struct polypy_rt_alloc** polypy_rt_table(void) { static struct polypy_rt_alloc* t = 0; return &t; }
static inline size_t* polypy_rt_count(void) { static size_t n = 0; return &n; }
static inline size_t* polypy_rt_capacity(void) { static size_t c = 0; return &c; }

static inline void polypy_rt_register(void* p, size_t size) {
  struct polypy_rt_alloc** table = polypy_rt_table();
  size_t* n = polypy_rt_count();
  size_t* cap = polypy_rt_capacity();
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 64;
    *table = (struct polypy_rt_alloc*)realloc(*table, *cap * sizeof(struct polypy_rt_alloc));
  }
  (*table)[*n].base = p;
  (*table)[*n].size = size;
  ++*n;
}

static inline int polypy_rt_unregister(void* p) {
  struct polypy_rt_alloc* table = *polypy_rt_table();
  size_t* n = polypy_rt_count();
  for (size_t i = 0; i < *n; ++i) {
    if (table[i].base == p) { table[i] = table[*n - 1]; --*n; return 1; }
  }
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

#ifdef __cplusplus

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

POLYPY_VEC2(float, float, 8) POLYPY_VEC3(float, float) POLYPY_VEC4(float, float, 16)
POLYPY_VEC2(double, double, 16) POLYPY_VEC3(double, double) POLYPY_VEC4(double, double, 16)
POLYPY_VEC2(int, int, 8) POLYPY_VEC3(int, int) POLYPY_VEC4(int, int, 16)
POLYPY_VEC2(unsigned int, uint, 8) POLYPY_VEC4(unsigned int, uint, 16)
POLYPY_VEC2(short, short, 4) POLYPY_VEC4(short, short, 8)
POLYPY_VEC2(unsigned char, uchar, 2) POLYPY_VEC4(unsigned char, uchar, 4)
POLYPY_VEC2(signed char, char, 2) POLYPY_VEC4(signed char, char, 4)
POLYPY_VEC2(long long, longlong, 16)
static __host__ __device__ inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { uint3 t; t.x = x; t.y = y; t.z = z; return t; }

/* ------------------------------------------------------------------ errors */
typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNotReady = 600
} cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

static inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    default: return "unknown error";
  }
}
static inline const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaError"; }

/* The last error: launches in polypy cannot fail asynchronously, so this stays cudaSuccess
 * unless an API call below reports a problem. */
static inline cudaError_t* polypy_rt_last_error() { static cudaError_t e = cudaSuccess; return &e; }
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
static inline cudaError_t cudaMalloc(void** p, size_t size) {
  size_t rounded = (size + 63) / 64 * 64;
  void* q = aligned_alloc(64, rounded ? rounded : 64);
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
  if (!polypy_rt_unregister(p)) return polypy_rt_fail(cudaErrorInvalidDevicePointer);
  free(p);
  return cudaSuccess;
}
static inline cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }

static inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  if ((int)kind < 0 || (int)kind > 4) return polypy_rt_fail(cudaErrorInvalidMemcpyDirection);
  if (count) memmove(dst, src, count);
  return cudaSuccess;
}
static inline cudaError_t cudaMemset(void* dst, int value, size_t count) { memset(dst, value, count); return cudaSuccess; }

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
typedef struct polypy_rt_stream* cudaStream_t;
typedef struct polypy_rt_event { double ms; }* cudaEvent_t;

static inline double polypy_rt_now_ms() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = (cudaStream_t)0; return cudaSuccess; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) { (void)s; return cudaSuccess; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return cudaSuccess; }
static inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t s = 0) { (void)s; return cudaMemcpy(dst, src, count, kind); }
static inline cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t s = 0) { (void)s; return cudaMemset(dst, value, count); }

static inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = (cudaEvent_t)malloc(sizeof(struct polypy_rt_event)); (*e)->ms = 0; return cudaSuccess; }
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0) { (void)s; e->ms = polypy_rt_now_ms(); return cudaSuccess; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e) { (void)e; return cudaSuccess; }
static inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) { *ms = (float)(end->ms - start->ms); return cudaSuccess; }

/* ------------------------------------------------------------------ device management */
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int multiProcessorCount;
  int major, minor;
};
static inline cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* p, int device) {
  (void)device;
  memset(p, 0, sizeof *p);
  strcpy(p->name, "polypy CPU");
  p->totalGlobalMem = (size_t)1 << 34;
  p->sharedMemPerBlock = 48 * 1024;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
  p->multiProcessorCount = 1;
  p->major = 8; p->minor = 0;
  return cudaSuccess;
}
static inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
static inline cudaError_t cudaSetDevice(int d) { (void)d; return cudaSuccess; }
static inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
static inline cudaError_t cudaDeviceReset(void) { return cudaSuccess; }
static inline cudaError_t cudaThreadSynchronize(void) { return cudaSuccess; }

#endif /* __cplusplus */

#endif /* POLYPY_CUDA_RUNTIME_H */
