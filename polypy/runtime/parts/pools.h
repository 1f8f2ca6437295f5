/* polypy runtime: stream-ordered allocation, memory pools and unified-memory hints (part of
 * cuda_runtime.h, included by parts/streams.h).
 *
 * Stream-ordered allocation is allocation now: every earlier operation of the stream is complete.
 * A pool is a name for cudaMalloc's memory with CUDA's attributes: its release threshold is kept
 * (cudaMalloc's freed-block cache, parts/memory.h, is what actually holds freed memory), its used
 * and reserved bytes are counted over the blocks allocated from it. */
enum cudaMemPoolAttr {
  cudaMemPoolReuseFollowEventDependencies = 1, cudaMemPoolReuseAllowOpportunistic = 2,
  cudaMemPoolReuseAllowInternalDependencies = 3, cudaMemPoolAttrReleaseThreshold = 4,
  cudaMemPoolAttrReservedMemCurrent = 5, cudaMemPoolAttrReservedMemHigh = 6, cudaMemPoolAttrUsedMemCurrent = 7,
  cudaMemPoolAttrUsedMemHigh = 8
};
enum cudaMemLocationType { cudaMemLocationTypeInvalid = 0, cudaMemLocationTypeDevice = 1, cudaMemLocationTypeHost = 2,
                           cudaMemLocationTypeHostNuma = 3, cudaMemLocationTypeHostNumaCurrent = 4 };
struct cudaMemLocation { enum cudaMemLocationType type; int id; };
enum cudaMemAllocationType { cudaMemAllocationTypeInvalid = 0, cudaMemAllocationTypePinned = 1 };
enum cudaMemAllocationHandleType { cudaMemHandleTypeNone = 0, cudaMemHandleTypePosixFileDescriptor = 1,
                                   cudaMemHandleTypeWin32 = 2, cudaMemHandleTypeWin32Kmt = 4, cudaMemHandleTypeFabric = 8 };
struct cudaMemPoolProps {
  enum cudaMemAllocationType allocType;
  enum cudaMemAllocationHandleType handleTypes;
  struct cudaMemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
};
enum cudaMemAccessFlags { cudaMemAccessFlagsProtNone = 0, cudaMemAccessFlagsProtRead = 1,
                          cudaMemAccessFlagsProtReadWrite = 3 };
struct cudaMemAccessDesc { struct cudaMemLocation location; enum cudaMemAccessFlags flags; };
struct polypy_rt_pool {
  unsigned long long threshold, used, used_high;
  int reuse[3];
  size_t max_size;
};
typedef struct polypy_rt_pool* cudaMemPool_t;
inline struct polypy_rt_pool* polypy_rt_default_pool(void) {
  static struct polypy_rt_pool p = {0, 0, 0, {1, 1, 1}, 0};
  return &p;
}
inline cudaMemPool_t* polypy_rt_current_pool(void) { static cudaMemPool_t p = 0; return &p; }
/* Which pool each live block came from, to count its bytes out when it is freed. */
struct polypy_rt_pool_block { void* base; size_t size; struct polypy_rt_pool* pool; };
inline struct polypy_rt_pool_block** polypy_rt_pool_blocks(void) { static struct polypy_rt_pool_block* t = 0; return &t; }
inline size_t* polypy_rt_pool_block_count(void) { static size_t n = 0; return &n; }

static inline cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (!pool) return polypy_rt_fail(cudaErrorInvalidValue);
  if (device != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  *pool = polypy_rt_default_pool();
  return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* pool, int device) {
  cudaError_t e = cudaDeviceGetDefaultMemPool(pool, device);
  if (e == cudaSuccess && *polypy_rt_current_pool()) *pool = *polypy_rt_current_pool();
  return e;
}
static inline cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool) {
  if (!pool) return polypy_rt_fail(cudaErrorInvalidValue);
  if (device != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  *polypy_rt_current_pool() = pool;
  return cudaSuccess;
}
static inline cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const struct cudaMemPoolProps* props) {
  if (!pool || !props || props->allocType != cudaMemAllocationTypePinned) return polypy_rt_fail(cudaErrorInvalidValue);
  if (props->location.type != cudaMemLocationTypeDevice || props->location.id != 0)
    return polypy_rt_fail(cudaErrorInvalidValue);
  if (props->handleTypes != cudaMemHandleTypeNone) return polypy_rt_fail(cudaErrorNotSupported);  /* no IPC */
  *pool = (cudaMemPool_t)calloc(1, sizeof(struct polypy_rt_pool));
  if (!*pool) return polypy_rt_fail(cudaErrorMemoryAllocation);
  (*pool)->reuse[0] = (*pool)->reuse[1] = (*pool)->reuse[2] = 1;
  (*pool)->max_size = props->maxSize;
  return cudaSuccess;
}
static inline cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  if (!pool || pool == polypy_rt_default_pool()) return polypy_rt_fail(cudaErrorInvalidValue);
  if (*polypy_rt_current_pool() == pool) *polypy_rt_current_pool() = 0;
  free(pool);
  return cudaSuccess;
}
static inline cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value) {
  if (!pool || !value) return polypy_rt_fail(cudaErrorInvalidValue);
  switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies: pool->reuse[attr - 1] = *(int*)value; return cudaSuccess;
    case cudaMemPoolAttrReleaseThreshold: pool->threshold = *(unsigned long long*)value; return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh:
    case cudaMemPoolAttrUsedMemHigh:  /* CUDA: may only be reset to zero */
      if (*(unsigned long long*)value != 0) return polypy_rt_fail(cudaErrorInvalidValue);
      pool->used_high = pool->used;
      return cudaSuccess;
    default: return polypy_rt_fail(cudaErrorInvalidValue);
  }
}
static inline cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value) {
  if (!pool || !value) return polypy_rt_fail(cudaErrorInvalidValue);
  switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies: *(int*)value = pool->reuse[attr - 1]; return cudaSuccess;
    case cudaMemPoolAttrReleaseThreshold: *(unsigned long long*)value = pool->threshold; return cudaSuccess;
    case cudaMemPoolAttrReservedMemCurrent:
    case cudaMemPoolAttrUsedMemCurrent: *(unsigned long long*)value = pool->used; return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh:
    case cudaMemPoolAttrUsedMemHigh: *(unsigned long long*)value = pool->used_high; return cudaSuccess;
    default: return polypy_rt_fail(cudaErrorInvalidValue);
  }
}
/* Trimming gives nothing back: the pool holds no memory of its own beyond what is allocated. */
static inline cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  (void)keep;
  return pool ? cudaSuccess : polypy_rt_fail(cudaErrorInvalidValue);
}
static inline cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc* desc, size_t count) {
  if (!pool || (count && !desc)) return polypy_rt_fail(cudaErrorInvalidValue);
  for (size_t i = 0; i < count; ++i)  /* the one device always has read-write access to its pools */
    if (desc[i].location.type != cudaMemLocationTypeDevice || desc[i].location.id != 0)
      return polypy_rt_fail(cudaErrorInvalidDevice);
  return cudaSuccess;
}
static inline cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags* flags, cudaMemPool_t pool,
                                               struct cudaMemLocation* location) {
  if (!flags || !pool || !location) return polypy_rt_fail(cudaErrorInvalidValue);
  *flags = location->type == cudaMemLocationTypeDevice && location->id == 0 ? cudaMemAccessFlagsProtReadWrite
                                                                             : cudaMemAccessFlagsProtNone;
  return cudaSuccess;
}
/* In a capturing stream, an allocation node of the capture's graph (parts/graph_memory.h: graph
 * memory, from no pool), and cudaFreeAsync of a graph allocation a free node. */
static inline cudaError_t polypy_rt_capture_malloc(void** p, size_t size, cudaStream_t s);
static inline cudaError_t polypy_rt_capture_free(void* p, cudaStream_t s);
static inline void polypy_rt_pool_forget(void* p);
static inline cudaError_t cudaMallocFromPoolAsync(void** p, size_t size, cudaMemPool_t pool, cudaStream_t s) {
  if (!p || !pool) return polypy_rt_fail(cudaErrorInvalidValue);
  if (polypy_rt_capturing(s)) return polypy_rt_capture_malloc(p, size, s);
  if (pool->max_size && pool->used + size > pool->max_size) return polypy_rt_fail(cudaErrorMemoryAllocation);
  cudaError_t e = cudaMalloc(p, size);
  if (e != cudaSuccess) return e;
  polypy_rt_locked lock;  /* the table, as cudaMalloc's registry: host threads allocate at once */
  size_t* n = polypy_rt_pool_block_count();
  struct polypy_rt_pool_block* grown = (struct polypy_rt_pool_block*)realloc(
      *polypy_rt_pool_blocks(), (*n + 1) * sizeof(struct polypy_rt_pool_block));
  if (!grown) {
    polypy_rt_free_unlocked(*p);
    *p = 0;
    return polypy_rt_fail(cudaErrorMemoryAllocation);
  }
  *polypy_rt_pool_blocks() = grown;
  grown[(*n)++] = polypy_rt_pool_block{*p, size, pool};
  __atomic_store_n(&polypy_rt_free_hooks()->pool_forget, &polypy_rt_pool_forget, __ATOMIC_RELEASE);
  pool->used += size;
  if (pool->used > pool->used_high) pool->used_high = pool->used;
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaMallocFromPoolAsync(T** p, size_t size, cudaMemPool_t pool, cudaStream_t s) {
  return cudaMallocFromPoolAsync((void**)p, size, pool, s);
}
static inline cudaError_t cudaMallocAsync(void** p, size_t size, cudaStream_t s) {
  cudaMemPool_t pool;
  cudaDeviceGetMemPool(&pool, 0);
  return cudaMallocFromPoolAsync(p, size, pool, s);
}
template <class T> static inline cudaError_t cudaMallocAsync(T** p, size_t size, cudaStream_t s) {
  return cudaMallocAsync((void**)p, size, s);
}
/* A pool's block freed (by cudaFree or cudaFreeAsync): its bytes leave the pool's count. */
static inline void polypy_rt_pool_forget(void* p) {
  polypy_rt_locked lock;
  size_t* n = polypy_rt_pool_block_count();
  struct polypy_rt_pool_block* t = *polypy_rt_pool_blocks();
  for (size_t i = 0; i < *n; ++i) {
    if (t[i].base == p) {
      t[i].pool->used -= t[i].size;
      t[i] = t[--*n];
      return;
    }
  }
}
/* cudaFreeAsync frees any device block (CUDA allows it for cudaMalloc's too), and cudaFree a
 * pool's block. */
static inline cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  if (polypy_rt_capturing(s)) return polypy_rt_capture_free(p, s);
  return cudaFree(p);
}

/* ------------------------------------------------------------------ unified memory */
/* Managed memory is host memory, visible to the host and the kernels at once: advice, prefetches
 * and attachments have nothing to move. Their arguments are still checked as CUDA checks them. */
#define cudaCpuDeviceId ((int)-1)
#define cudaInvalidDeviceId ((int)-2)
#define cudaMemAttachGlobal 0x01
#define cudaMemAttachHost 0x02
#define cudaMemAttachSingle 0x04
enum cudaMemoryAdvise {
  cudaMemAdviseSetReadMostly = 1, cudaMemAdviseUnsetReadMostly = 2, cudaMemAdviseSetPreferredLocation = 3,
  cudaMemAdviseUnsetPreferredLocation = 4, cudaMemAdviseSetAccessedBy = 5, cudaMemAdviseUnsetAccessedBy = 6
};
static inline cudaError_t cudaMemAdvise(const void* p, size_t count, enum cudaMemoryAdvise advice, int device) {
  if (!p || count == 0 || (int)advice < 1 || (int)advice > 6) return polypy_rt_fail(cudaErrorInvalidValue);
  if (device != 0 && device != cudaCpuDeviceId) return polypy_rt_fail(cudaErrorInvalidDevice);
  return cudaSuccess;
}
static inline cudaError_t cudaMemPrefetchAsync(const void* p, size_t count, int device, cudaStream_t s = 0) {
  (void)s;
  if (!p || count == 0) return polypy_rt_fail(cudaErrorInvalidValue);
  if (device != 0 && device != cudaCpuDeviceId) return polypy_rt_fail(cudaErrorInvalidDevice);
  return cudaSuccess;
}
/* CUDA 13's forms: a location instead of a device number. */
static inline int polypy_rt_location_device(struct cudaMemLocation where) {
  if (where.type == cudaMemLocationTypeDevice) return where.id;
  return where.type == cudaMemLocationTypeInvalid ? cudaInvalidDeviceId : cudaCpuDeviceId;  /* host, host NUMA */
}
static inline cudaError_t cudaMemAdvise(const void* p, size_t count, enum cudaMemoryAdvise advice,
                                        struct cudaMemLocation where) {
  return cudaMemAdvise(p, count, advice, polypy_rt_location_device(where));
}
static inline cudaError_t cudaMemPrefetchAsync(const void* p, size_t count, struct cudaMemLocation where,
                                               unsigned int flags, cudaStream_t s = 0) {
  if (flags != 0) return polypy_rt_fail(cudaErrorInvalidValue);
  return cudaMemPrefetchAsync(p, count, polypy_rt_location_device(where), s);
}
static inline cudaError_t cudaStreamAttachMemAsync(cudaStream_t s, void* p, size_t length = 0,
                                                   unsigned int flags = cudaMemAttachSingle) {
  (void)s; (void)length;
  if (!p || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost && flags != cudaMemAttachSingle))
    return polypy_rt_fail(cudaErrorInvalidValue);
  return cudaSuccess;
}
