/* polypy's CUDA runtime on the host.
 *
 * One header (with its parts in parts/, one per responsibility), two uses: the frontend parses
 * CUDA programs against it (instead of the CUDA toolkit's headers, which a machine without a
 * toolkit lacks), and `polypy translate` pastes it, parts included, into every translated whole
 * program, where it implements the runtime API on host memory (docs/runtime_api.md gives every
 * function's status):
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
#ifdef __cplusplus
/* As nvcc's host headers do: a range-for over a braced list and a placement new need these, and
 * no name the program spells shows it (the runtime's slicer keeps them: runtime_slice.py). Only
 * where the C++ library has them (polypy's bundled headers, for a machine without one, do not). */
#if __has_include(<initializer_list>)
#include <initializer_list>
#endif
#if __has_include(<new>)
#include <new>
#endif
#endif
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
#ifndef __grid_constant__
#define __grid_constant__
#endif
#ifndef __align__
#define __align__(n) __attribute__((aligned(n)))
#endif
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

/* A statement that does something only once a part of the runtime has installed the hook it
 * reads (parts/queues.h, pools.h, graph_memory.h set theirs when a program first uses them), the
 * runtime function `installed` being what that part installs: a translated program that carries
 * no `installed` carries no such statement either (frontend/runtime_slice.py leaves it out). */
#define POLYPY_RT_HOOKED(installed, ...) __VA_ARGS__
/* A statement for large sizes (a copy, fill or allocation from POLYPY_RT_POPULATE_BYTES up,
 * parts/memory.h): a program whose every copy, fill and allocation polypy proved smaller carries
 * none (frontend/copy_sizes.py, frontend/runtime_slice.py). */
#define POLYPY_RT_LARGE(...) __VA_ARGS__

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
 * (polypy_rt_take_copy). cudaFree forgets either without freeing it, except a shared block the
 * host already freed (freed, polypy_rt_shared_free): cudaFree frees that one. */
struct polypy_rt_alloc { void* base; size_t size; int shared; int taken; int freed; };
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
    /* A larger table; the old one is kept, not freed: a stream's worker may be reading it
     * (parts/queues.h), and the tables together are at most twice the last one. */
    struct polypy_rt_alloc* grown = (struct polypy_rt_alloc*)malloc(2 * (*cap ? *cap : 32) * sizeof(struct polypy_rt_alloc));
    if (*n) memcpy(grown, *table, *n * sizeof(struct polypy_rt_alloc));
    *cap = 2 * (*cap ? *cap : 32);
    __atomic_store_n(table, grown, __ATOMIC_RELEASE);
  }
  (*table)[*n].base = p;
  (*table)[*n].size = size;
  (*table)[*n].shared = 0;
  (*table)[*n].taken = 0;
  (*table)[*n].freed = 0;
  /* Published after the entry and the table it is in: a worker that reads the new count (acquire,
   * polypy_rt_entry) reads that table, never an older one too short for it. */
  __atomic_store_n(n, *n + 1, __ATOMIC_RELEASE);
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
  size_t n = __atomic_load_n(polypy_rt_count(), __ATOMIC_ACQUIRE); /* then the table: see polypy_rt_register */
  struct polypy_rt_alloc* table = __atomic_load_n(polypy_rt_table(), __ATOMIC_ACQUIRE);
  for (size_t i = 0; i < n; ++i)
    if (table[i].base == p) return &table[i];
  return 0;
}

/* The allocation containing p: its base and size; returns 0 if p is not device memory. */
static inline int polypy_rt_find_alloc(const void* p, void** base, size_t* size) {
  size_t n = __atomic_load_n(polypy_rt_count(), __ATOMIC_ACQUIRE); /* then the table: see polypy_rt_register */
  struct polypy_rt_alloc* table = __atomic_load_n(polypy_rt_table(), __ATOMIC_ACQUIRE);
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

/* The pointers a launch reads from a __constant__/__device__ array of records (Kernel.held_pointers,
 * frontend/lower/held_pointers.py): `count` records of `size` bytes at `symbol`, the pointers at
 * byte offsets[k] of each (paths[k] their member, for the message). Every one that is not null
 * must point into a live allocation, at a multiple of `align` bytes; else the launch stops with
 * `message`, a diagnostic whose one %s is the pointer ("d_unique[3].d_in2"). *pool: the lowest
 * allocation they point into; *extent: `align`-byte elements from there to the end of the highest. */
static inline void polypy_rt_held_pointers(const char* message, const char* symbol_name, const void* symbol,
                                           size_t size, size_t count, const size_t* offsets,
                                           const char* const* paths, size_t n, size_t align, void** pool,
                                           unsigned long long* extent) {
  char* lo = 0;
  char* hi = 0;
  for (size_t r = 0; r < count; ++r) {
    for (size_t k = 0; k < n; ++k) {
      void* p;
      void* base;
      size_t bytes;
      memcpy(&p, (const char*)symbol + r * size + offsets[k], sizeof p);
      if (!p) continue;
      if (!polypy_rt_find_alloc(p, &base, &bytes) || (size_t)((char*)p - (char*)base) % align != 0) {
        char what[512];
        if (count > 1) snprintf(what, sizeof what, "%s[%lu]%s", symbol_name, (unsigned long)r, paths[k]);
        else snprintf(what, sizeof what, "%s%s", symbol_name, paths[k]);
        fflush(stdout);
        fprintf(stderr, message, what);
        exit(1);
      }
      if (!lo || (char*)base < lo) lo = (char*)base;
      if ((char*)base + bytes > hi) hi = (char*)base + bytes;
    }
  }
  *pool = lo;
  *extent = lo ? (unsigned long long)((size_t)(hi - lo) / align) : 0u;
}

/* The rows of a T** pointer table a launch reads (frontend: the table, its pool and the pool's
 * address): every entry that is not null, from `table` to the end of its allocation, must be a
 * multiple of `align` bytes (a GPU faults on a misaligned row: cudaErrorMisalignedAddress), else
 * the launch stops with `message`, a diagnostic whose one %lu is the row. A table in no known
 * allocation is not checked (its length is unknown). */
static inline void polypy_rt_table_rows(const char* message, const void* table, size_t align) {
  void* base;
  size_t bytes;
  if (!table || !polypy_rt_find_alloc(table, &base, &bytes)) return;
  size_t rows = (size_t)((char*)base + bytes - (const char*)table) / sizeof(void*);
  for (size_t r = 0; r < rows; ++r) {
    void* p;
    memcpy(&p, (const char*)table + r * sizeof p, sizeof p);
    if (p && (size_t)p % align != 0) {
      fflush(stdout);
      fprintf(stderr, message, (unsigned long)r);
      exit(1);
    }
  }
}

#ifdef __cplusplus
/* The graphs' containers (parts/graphs.h); polypy's device prelude may have defined __noinline__
 * as CUDA does, which the C++ library's headers spell as an attribute. */
#pragma push_macro("__noinline__")
#undef __noinline__
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#pragma pop_macro("__noinline__")

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
/* Thrust in host code is NVIDIA's own, on its OpenMP device system: device_vector in host memory
 * (polypy's device memory), algorithms on all cores (docs/thrust.md). */
#ifndef THRUST_DEVICE_SYSTEM
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_OMP
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
/* Host code may call rsqrtf and rsqrt (a __host__ __device__ function of the samples' helper_math.h
 * under nvcc): 1/sqrt in the argument's precision, what device code computes (polypy.ir.mathfns). */
static inline __host__ float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline __host__ double rsqrt(double x) { return 1.0 / sqrt(x); }
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

/* The rest of the runtime, one header per responsibility (polypy/runtime/parts/; `polypy translate`
 * pastes each where it is included). */
#include "parts/errors.h"
#include "parts/queues.h"
#include "parts/memory.h"
#include "parts/streams.h"
#include "parts/memory_nd.h"
#include "parts/graphs.h"
#include "parts/graph_nodes.h"
#include "parts/capture.h"
#include "parts/graph_memory.h"
#include "parts/graph_conditional.h"
#include "parts/graph_exec.h"
#include "parts/device.h"
#include "parts/heap.h"
#include "parts/execution.h"
#include "parts/kernels.h"
#include "parts/dynamic.h"
#include "parts/driver.h"
#include "parts/texture.h"
#include "parts/refused.h"

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
