/* polypy runtime: device memory, copies, fills, copy tracing (part of cuda_runtime.h). */
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
/* CUDA: "any address ... returned by one of the memory allocation routines from the driver or runtime
 * API is always aligned to at least 256 bytes" (programs assert it: dmmaTensorCoreGemm checks 128). */
#define POLYPY_RT_MALLOC_ALIGN 256
static inline size_t polypy_rt_rounded(size_t size) {
  return size ? (size + POLYPY_RT_MALLOC_ALIGN - 1) / POLYPY_RT_MALLOC_ALIGN * POLYPY_RT_MALLOC_ALIGN
              : POLYPY_RT_MALLOC_ALIGN;
}

/* A new block of device memory. From 2 MiB up, on 2 MiB pages where the kernel has transparent
 * huge pages (as a GPU maps its memory in large pages): a program's first touch of its device
 * arrays (cudaMemcpy) then takes one page fault per 2 MiB instead of one per 4 KiB, and kernels
 * sweeping them miss the TLB far less (Rodinia nw, srad, hotspot: hundreds of MiB). A program
 * whose allocations polypy proved smaller than POLYPY_RT_POPULATE_BYTES carries none of it
 * (POLYPY_RT_LARGE, cuda_runtime.h). */
static inline void* polypy_rt_huge_block(size_t rounded) {
#ifdef POLYPY_RT_HUGE_PAGE
  if (rounded >= POLYPY_RT_HUGE_PAGE) {
    size_t bytes = (rounded + POLYPY_RT_HUGE_PAGE - 1) / POLYPY_RT_HUGE_PAGE * POLYPY_RT_HUGE_PAGE;
    void* q = aligned_alloc(POLYPY_RT_HUGE_PAGE, bytes);
    if (q) (void)madvise(q, bytes, MADV_HUGEPAGE);  /* advice only: 4 KiB pages where refused */
    return q;
  }
#endif
  return aligned_alloc(POLYPY_RT_MALLOC_ALIGN, rounded);
}
static inline void* polypy_rt_device_block(size_t rounded) {
  POLYPY_RT_LARGE(return polypy_rt_huge_block(rounded););
  return aligned_alloc(POLYPY_RT_MALLOC_ALIGN, rounded);
}

/* Host threads may allocate and free at once (a sample's worker thread per stream): the registry
 * and the cache of freed blocks change under one lock. */
POLYPY_RT_STATE char* polypy_rt_lock_flag(void) { static char flag = 0; return &flag; }
struct polypy_rt_locked {
  polypy_rt_locked() { while (__atomic_test_and_set(polypy_rt_lock_flag(), __ATOMIC_ACQUIRE)) {} }
  ~polypy_rt_locked() { __atomic_clear(polypy_rt_lock_flag(), __ATOMIC_RELEASE); }
};

static inline cudaError_t polypy_rt_malloc_unlocked(void** p, size_t size) {
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
/* The runtime's first allocation makes its context, which initializes the driver API as CUDA's
 * runtime does (cuInit): driver queries after it need no cuInit of the program's own (Rodinia
 * mummergpu's cuMemGetInfo after cudaMalloc; parts/driver.h). */
POLYPY_RT_STATE int* polypy_rt_context_made(void) { static int made = 0; return &made; }
static inline cudaError_t cudaMalloc(void** p, size_t size) {
  if (!p) return polypy_rt_fail(cudaErrorInvalidValue);
  *polypy_rt_context_made() = 1;
  polypy_rt_locked lock;
  return polypy_rt_malloc_unlocked(p, size);
}
template <class T> static inline cudaError_t cudaMalloc(T** p, size_t size) { return cudaMalloc((void**)p, size); }
static inline cudaError_t cudaMallocManaged(void** p, size_t size, unsigned int flags = 1) { (void)flags; return cudaMalloc(p, size); }
template <class T> static inline cudaError_t cudaMallocManaged(T** p, size_t size, unsigned int flags = 1) { return cudaMallocManaged((void**)p, size, flags); }
static inline cudaError_t cudaMallocHost(void** p, size_t size) { return cudaMalloc(p, size); }
template <class T> static inline cudaError_t cudaMallocHost(T** p, size_t size) { return cudaMalloc((void**)p, size); }

static inline cudaError_t polypy_rt_free_unlocked(void* p) {
  struct polypy_rt_alloc* entry = polypy_rt_entry(p);
  int host_owned = entry && (entry->shared || entry->taken);
  int host_freed = entry && entry->shared && entry->freed;
  size_t size = 0;
  if (!polypy_rt_unregister(p, &size)) return polypy_rt_fail(cudaErrorInvalidDevicePointer);
  if (host_freed) free(p);  /* the host's free came first and left it to this one */
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
/* Blocks that other parts hand out and cudaFree frees too: a memory pool's (parts/pools.h) and a
 * graph allocation (parts/graph_memory.h). Each part sets its hook when it first hands out a
 * block, so that a program using neither calls, and carries, neither. */
struct polypy_rt_free_hooks {
  void (*pool_forget)(void* p);                /* a pool's block leaves its pool's count */
  int (*graph_free)(void* p, cudaError_t* e);  /* 1 where p is a live graph allocation, then freed */
};
POLYPY_RT_STATE struct polypy_rt_free_hooks* polypy_rt_free_hooks(void) { static struct polypy_rt_free_hooks h = {0, 0}; return &h; }
/* Whether p is a live graph allocation, then freed (its error in *e). */
static inline int polypy_rt_graph_freed(void* p, cudaError_t* e) {
  int (*graph)(void*, cudaError_t*) = __atomic_load_n(&polypy_rt_free_hooks()->graph_free, __ATOMIC_ACQUIRE);
  return graph && graph(p, e);
}
static inline void polypy_rt_pool_forgets(void* p) {
  void (*pool)(void*) = __atomic_load_n(&polypy_rt_free_hooks()->pool_forget, __ATOMIC_ACQUIRE);
  if (pool) pool(p);
}
static inline cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  POLYPY_RT_HOOKED(polypy_rt_graph_mem_free, { cudaError_t e; if (polypy_rt_graph_freed(p, &e)) return e; });
  POLYPY_RT_HOOKED(polypy_rt_queues_device_wait, polypy_rt_device_wait());  /* as CUDA's: after every stream's work */
  POLYPY_RT_HOOKED(polypy_rt_pool_forget, polypy_rt_pool_forgets(p));
  polypy_rt_locked lock;
  return polypy_rt_free_unlocked(p);
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
/* memcpy(dst, src, count), or memset(dst, value, count) where src is null, as described above, from
 * POLYPY_RT_POPULATE_BYTES up (below it, both are the plain call: no population, one thread). */
static inline void polypy_rt_fill_large(void* dst, const void* src, int value, size_t count) {
  char* d = (char*)dst;
  const char* s = (const char*)src;
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
/* The copy or fill of every cudaMemcpy and cudaMemset: overlapping ranges are memmove's; large
 * sizes go to polypy_rt_fill_large, which a program whose every copy and fill polypy proved
 * smaller does not carry (POLYPY_RT_LARGE, cuda_runtime.h). */
static inline void polypy_rt_fill_bytes(void* dst, const void* src, int value, size_t count) {
  if (src && (char*)dst < (const char*)src + count && (const char*)src < (char*)dst + count) {
    memmove(dst, src, count);
    return;
  }
  POLYPY_RT_LARGE(if (count >= POLYPY_RT_POPULATE_BYTES) return polypy_rt_fill_large(dst, src, value, count););
  if (src) memcpy(dst, src, count);
  else memset(dst, value, count);
}

/* What CUDA checks when a copy or fill is called, before any work is done or queued (an
 * asynchronous call returns these errors itself, parts/streams.h): the direction, a null pointer
 * with bytes to touch (cudaErrorInvalidValue), and a range running past the end of a block the
 * runtime knows (cudaErrorInvalidValue): a device block polypy allocated owns its size rounded up
 * to CUDA's 256-byte alignment, host memory a device pointer became owns its exact size. Memory
 * the registry does not know (host buffers, __device__ symbols) is not checked. */
static inline int polypy_rt_past_block(const void* p, size_t count) {
  void* base = 0;
  size_t size = 0;
  if (!count || !polypy_rt_find_alloc(p, &base, &size)) return 0;
  struct polypy_rt_alloc* entry = polypy_rt_entry(base);
  size_t owned = entry && (entry->shared || entry->taken) ? size : polypy_rt_rounded(size);
  size_t at = (size_t)((const char*)p - (const char*)base);
  return count > owned - at;
}
static inline cudaError_t polypy_rt_check_fill(const void* dst, size_t count) {
  if (count && !dst) return polypy_rt_fail(cudaErrorInvalidValue);
  if (polypy_rt_past_block(dst, count)) return polypy_rt_fail(cudaErrorInvalidValue);
  return cudaSuccess;
}
static inline cudaError_t polypy_rt_check_copy(const void* dst, const void* src, size_t count,
                                               enum cudaMemcpyKind kind) {
  if ((int)kind < 0 || (int)kind > 4) return polypy_rt_fail(cudaErrorInvalidMemcpyDirection);
  if (count && !src) return polypy_rt_fail(cudaErrorInvalidValue);
  if (polypy_rt_past_block(src, count)) return polypy_rt_fail(cudaErrorInvalidValue);
  return polypy_rt_check_fill(dst, count);
}
/* A 2-D copy's or fill's rows: width > pitch is cudaErrorInvalidPitchValue (checked first by the
 * callers); the last row ends (height - 1) * pitch + width bytes after the start. */
static inline size_t polypy_rt_rows_span(size_t pitch, size_t width, size_t height) {
  return height && width ? (height - 1) * pitch + width : 0;
}
static inline cudaError_t polypy_rt_memcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                           int elem, size_t elem_size) {
  cudaError_t bad = polypy_rt_check_copy(dst, src, count, kind);
  if (bad != cudaSuccess) return bad;
  POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());  /* a copy of the legacy default stream */
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
  POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());
  if (*device == host) return cudaSuccess;  /* a round trip's later turns (frontend/host_round_trips.py) */
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

/* cudaMemcpy(host, device, count, cudaMemcpyDeviceToHost) closing a round trip whose device array
 * became the host buffer (frontend/host_round_trips.py): nothing to copy where it did; otherwise
 * the copy. */
static inline cudaError_t polypy_rt_same_copy_bytes(void* host, const void* device, size_t count, int elem,
                                                    size_t elem_size) {
  if (host != device) return polypy_rt_memcpy(host, device, count, cudaMemcpyDeviceToHost, elem, elem_size);
  POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());
  polypy_rt_trace_copy(device, count, elem, elem_size);
  return cudaSuccess;
}
template <class T> static inline cudaError_t polypy_rt_same_copy(T* host, const void* device, size_t count) {
  return polypy_rt_same_copy_bytes((void*)host, device, count, polypy_rt_elem_of<T>::value, sizeof(T));
}
static inline cudaError_t polypy_rt_same_copy(void* host, const void* device, size_t count) {
  return polypy_rt_same_copy_bytes(host, device, count, polypy_rt_bytes, 1);
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
/* free(p) of a host buffer a device pointer may still name (polypy_rt_share_copy) where the host
 * frees it before that pointer's cudaFree, after every other use of the device pointer
 * (frontend/host_copies.py). The last owner of the memory frees it: a host pointer that took it
 * (polypy_rt_take_copy) if one still holds it, else the cudaFree, so that no entry of the
 * allocation table names freed memory meanwhile. Otherwise polypy_rt_host_free. */
static inline void polypy_rt_shared_free(void* p) {
  if (p) {
    polypy_rt_locked lock;
    struct polypy_rt_alloc* entry = polypy_rt_entry(p);
    if (entry && entry->shared && !entry->freed) {
      polypy_rt_host_block* b = polypy_rt_host_find(p);
      if (b && b->owners > 1) {
        --b->owners;
        return;
      }
      if (b) polypy_rt_host_forget(b);
      entry->freed = 1;
      return;
    }
  }
  polypy_rt_host_free(p);
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
  POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());
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
static inline cudaError_t cudaMemset(void* dst, int value, size_t count) {
  cudaError_t bad = polypy_rt_check_fill(dst, count);
  if (bad != cudaSuccess) return bad;
  POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());
  if (count) polypy_rt_fill_bytes(dst, 0, value, count);
  return cudaSuccess;
}
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
  POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());
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

/* A symbol copy: the direction to (from) a symbol is host or device to device (device to host or
 * device), or cudaMemcpyDefault; offset + count must lie inside the symbol. */
static inline cudaError_t polypy_rt_check_symbol(const void* other, size_t count, size_t offset, size_t size,
                                                 enum cudaMemcpyKind kind, int to_symbol) {
  int ok = kind == cudaMemcpyDefault || kind == (to_symbol ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost) ||
           kind == cudaMemcpyDeviceToDevice;
  if (!ok) return polypy_rt_fail(cudaErrorInvalidMemcpyDirection);
  if (offset > size || count > size - offset) return polypy_rt_fail(cudaErrorInvalidValue);
  if (count && !other) return polypy_rt_fail(cudaErrorInvalidValue);
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaMemcpyToSymbol(T& symbol, const void* src, size_t count, size_t offset = 0,
                                             enum cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  cudaError_t bad = polypy_rt_check_symbol(src, count, offset, sizeof(T), kind, 1);
  if (bad != cudaSuccess) return bad;
  POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());
  memcpy((char*)&symbol + offset, src, count);
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                               enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
  cudaError_t bad = polypy_rt_check_symbol(dst, count, offset, sizeof(T), kind, 0);
  if (bad != cudaSuccess) return bad;
  POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());
  memcpy(dst, (const char*)&symbol + offset, count);
  return cudaSuccess;
}

