/* polypy runtime: graph memory nodes (part of cuda_runtime.h): allocation and free nodes, made by
 * hand or by capturing cudaMallocAsync/cudaFreeAsync, the graph memory attributes and trimming.
 *
 * An allocation node gets its address when it is made, and keeps it over instantiations and
 * launches (CUDA's rule): the address is a range of address space reserved then, with no memory
 * behind it. Memory is mapped into the range when the node runs, and the allocation is live from
 * then until a free node of the same graph frees it, or, if the graph frees it nowhere, until
 * cudaFree, cudaFreeAsync, a free node of another graph or a relaunch with
 * cudaGraphInstantiateFlagAutoFreeOnLaunch does. A freed range keeps its memory, which stays
 * the graph's (CUDA's footprint): a later allocation node of any graph takes memory from freed
 * ranges before it maps new memory, as CUDA reuses the physical memory of graphs whose runs have
 * finished (here every run has finished when cudaGraphLaunch returns); cudaDeviceGraphMemTrim
 * unmaps the memory of every freed range.
 *
 * An allocation node made after a free node of the same graph that it depends on (directly or
 * not) reuses the freed range when it has the same size and no other allocation of the range is
 * unordered with it: as CUDA reuses addresses within a graph.
 *
 * The attributes count what is mapped: used memory is the memory of the ranges that are live or
 * belong to a live executable graph, reserved memory all mapped memory (a destroyed executable
 * graph's freed ranges keep theirs until reused or trimmed). Where mmap is not available (the
 * frontend's parse) a range is an ordinary block and mapping changes only the count. */
struct polypy_rt_graph_alloc {
  void* base;
  size_t size, span;   /* the bytes asked for; the bytes reserved (whole pages) */
  bool mapped, live;
  int refs;            /* the nodes (of graphs and executable graphs) that name it */
  int execs;           /* the live executable graphs that hold it */
};
POLYPY_RT_STATE std::vector<struct polypy_rt_graph_alloc*>* polypy_rt_graph_allocs() {
  static std::vector<struct polypy_rt_graph_alloc*> all;
  return &all;
}
struct polypy_rt_graph_mem_marks { unsigned long long used_high, reserved_high; };
POLYPY_RT_STATE struct polypy_rt_graph_mem_marks* polypy_rt_graph_mem_marks() {
  static struct polypy_rt_graph_mem_marks m = {0, 0};
  return &m;
}

/* ------------------------------------------------------------------ address space */
static inline void* polypy_rt_va_reserve(size_t span) {
#ifdef POLYPY_RT_POPULATE
  void* p = mmap(0, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? 0 : p;
#else
  return aligned_alloc(4096, span);
#endif
}
static inline bool polypy_rt_va_map(void* base, size_t span) {
#ifdef POLYPY_RT_POPULATE
  if (mprotect(base, span, PROT_READ | PROT_WRITE) != 0) return false;
#ifdef POLYPY_RT_HUGE_PAGE
  if (span >= POLYPY_RT_HUGE_PAGE) (void)madvise(base, span, MADV_HUGEPAGE);
#endif
#endif
  (void)base; (void)span;
  return true;
}
/* The memory behind the range goes back to the system; the range stays reserved. */
static inline void polypy_rt_va_unmap(void* base, size_t span) {
#ifdef POLYPY_RT_POPULATE
  (void)mmap(base, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
#endif
  (void)base; (void)span;
}
static inline void polypy_rt_va_release(void* base, size_t span) {
#ifdef POLYPY_RT_POPULATE
  munmap(base, span);
#else
  (void)span;
  free(base);
#endif
}

/* ------------------------------------------------------------------ accounting */
static inline void polypy_rt_graph_mem_count(unsigned long long* used, unsigned long long* reserved) {
  *used = *reserved = 0;
  for (struct polypy_rt_graph_alloc* a : *polypy_rt_graph_allocs()) {
    if (!a->mapped) continue;
    *reserved += a->span;
    if (a->live || a->execs > 0) *used += a->span;
  }
}
static inline void polypy_rt_graph_mem_note(void) {
  unsigned long long used, reserved;
  polypy_rt_graph_mem_count(&used, &reserved);
  struct polypy_rt_graph_mem_marks* m = polypy_rt_graph_mem_marks();
  if (used > m->used_high) m->used_high = used;
  if (reserved > m->reserved_high) m->reserved_high = reserved;
}
/* An allocation no node names, not live and without memory: its address space goes back. */
static inline void polypy_rt_graph_alloc_settle(struct polypy_rt_graph_alloc* a) {
  if (a->refs > 0 || a->live || a->mapped) return;
  std::vector<struct polypy_rt_graph_alloc*>* all = polypy_rt_graph_allocs();
  for (size_t i = 0; i < all->size(); ++i)
    if ((*all)[i] == a) { all->erase(all->begin() + i); break; }
  polypy_rt_va_release(a->base, a->span);
  delete a;
}
static inline void polypy_rt_graph_alloc_hold(struct polypy_rt_graph_alloc* a) { ++a->refs; }
static inline void polypy_rt_graph_alloc_drop(struct polypy_rt_graph_alloc* a) {
  polypy_rt_locked lock;
  --a->refs;
  polypy_rt_graph_alloc_settle(a);
}
static inline struct polypy_rt_graph_alloc* polypy_rt_graph_alloc_at(const void* p) {
  for (struct polypy_rt_graph_alloc* a : *polypy_rt_graph_allocs())
    if (a->base == p) return a;
  return 0;
}

/* ------------------------------------------------------------------ running the nodes */
/* The allocation node's run: memory for the range (taken from freed ranges first), live. */
static inline cudaError_t polypy_rt_graph_alloc_run(struct polypy_rt_graph_alloc* a) {
  polypy_rt_locked lock;
  if (a->live) return polypy_rt_fail(cudaErrorInvalidValue);  /* the previous launch's, never freed */
  if (!a->mapped) {
    size_t taken = 0;
    for (struct polypy_rt_graph_alloc* other : *polypy_rt_graph_allocs()) {
      if (taken >= a->span) break;
      if (other == a || !other->mapped || other->live) continue;
      polypy_rt_va_unmap(other->base, other->span);
      other->mapped = false;
      taken += other->span;
    }
    if (!polypy_rt_va_map(a->base, a->span)) return polypy_rt_fail(cudaErrorMemoryAllocation);
    a->mapped = true;
  }
  a->live = true;
  polypy_rt_register(a->base, a->size);  /* device memory for copies, cudaFree, pointer queries */
  polypy_rt_graph_mem_note();
  std::vector<struct polypy_rt_graph_alloc*> quiet(*polypy_rt_graph_allocs());
  for (struct polypy_rt_graph_alloc* other : quiet) polypy_rt_graph_alloc_settle(other);
  return cudaSuccess;
}
/* A free (a free node, cudaFree, cudaFreeAsync): the allocation ends, its memory stays mapped. */
static inline cudaError_t polypy_rt_graph_free_unlocked(struct polypy_rt_graph_alloc* a) {
  if (!a->live) return polypy_rt_fail(cudaErrorInvalidValue);
  a->live = false;
  polypy_rt_unregister(a->base, 0);
  polypy_rt_graph_alloc_settle(a);
  return cudaSuccess;
}
static inline cudaError_t polypy_rt_graph_free_run(struct polypy_rt_graph_alloc* a) {
  polypy_rt_locked lock;
  return polypy_rt_graph_free_unlocked(a);
}
/* cudaFree's and cudaFreeAsync's question (parts/memory.h): whether p is a live graph allocation,
 * which it then frees. */
static inline int polypy_rt_graph_mem_free(void* p, cudaError_t* e) {
  polypy_rt_locked lock;
  struct polypy_rt_graph_alloc* a = polypy_rt_graph_alloc_at(p);
  if (!a || !a->live) return 0;
  *e = polypy_rt_graph_free_unlocked(a);
  return 1;
}

/* ------------------------------------------------------------------ making the nodes */
/* Whether every allocation of `a` in g is ordered before `deps` (a free node of g after it). */
static inline bool polypy_rt_graph_alloc_reusable(cudaGraph_t g, struct polypy_rt_graph_alloc* a,
                                                  const cudaGraphNode_t* deps, size_t count) {
  bool freed_before = false;
  for (cudaGraphNode_t node : g->nodes) {
    if (node->alloc != a) continue;
    bool before = false;
    for (size_t i = 0; i < count; ++i) before = before || polypy_rt_reaches(node, deps[i]);
    if (!before) return false;  /* an allocation or a free of a not ordered before the new node */
    if (node->type == cudaGraphNodeTypeMemFree) freed_before = true;
  }
  return freed_before;
}
static inline cudaError_t polypy_rt_add_alloc(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                              size_t count, size_t bytes, void** dptr) {
  if (bytes == 0 || !dptr) return polypy_rt_fail(cudaErrorInvalidValue);
  struct polypy_rt_graph_alloc* a = 0;
  if (g)
    for (cudaGraphNode_t node : g->nodes)
      if (node->type == cudaGraphNodeTypeMemFree && node->alloc->size == bytes &&
          polypy_rt_graph_alloc_reusable(g, node->alloc, deps, count)) { a = node->alloc; break; }
  bool fresh = a == 0;
  if (fresh) {
    size_t span = (bytes + 4095) / 4096 * 4096;
    void* base = polypy_rt_va_reserve(span);
    if (!base) return polypy_rt_fail(cudaErrorMemoryAllocation);
    a = new polypy_rt_graph_alloc{base, bytes, span, false, false, 0, 0};
  }
  cudaError_t e = polypy_rt_graph_add(out, g, deps, count, cudaGraphNodeTypeMemAlloc);
  if (e != cudaSuccess) {
    if (fresh) { polypy_rt_va_release(a->base, a->span); delete a; }
    return e;
  }
  if (fresh) {
    polypy_rt_locked lock;
    polypy_rt_graph_allocs()->push_back(a);
    __atomic_store_n(&polypy_rt_free_hooks()->graph_free, &polypy_rt_graph_mem_free, __ATOMIC_RELEASE);
  }
  a->refs += 1;
  (*out)->alloc = a;
  (*out)->work = [a]() { return polypy_rt_graph_alloc_run(a); };
  *dptr = a->base;
  return cudaSuccess;
}
/* The pool's properties and access: one device, pinned memory, no handles. */
static inline cudaError_t polypy_rt_alloc_params_check(const struct cudaMemPoolProps* props,
                                                       const struct cudaMemAccessDesc* access, size_t count) {
  if (props->allocType != cudaMemAllocationTypePinned || props->location.type != cudaMemLocationTypeDevice)
    return polypy_rt_fail(cudaErrorInvalidValue);
  if (props->location.id != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  if (props->handleTypes != cudaMemHandleTypeNone) return polypy_rt_fail(cudaErrorNotSupported);
  if (count && !access) return polypy_rt_fail(cudaErrorInvalidValue);
  for (size_t i = 0; i < count; ++i)
    if (access[i].location.type != cudaMemLocationTypeDevice || access[i].location.id != 0)
      return polypy_rt_fail(cudaErrorInvalidDevice);
  return cudaSuccess;
}
static inline cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                   size_t count, struct cudaMemAllocNodeParams* p) {
  if (!p) return polypy_rt_fail(cudaErrorInvalidValue);
  cudaError_t e = polypy_rt_alloc_params_check(&p->poolProps, p->accessDescs, p->accessDescCount);
  if (e != cudaSuccess) return e;
  return polypy_rt_add_alloc(out, g, deps, count, p->bytesize, &p->dptr);
}
/* The address must be a graph allocation's (made by any graph: CUDA lets a graph free another
 * graph's allocation that its graph never frees). */
static inline cudaError_t polypy_rt_add_free(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                             size_t count, void* p) {
  struct polypy_rt_graph_alloc* a;
  {
    polypy_rt_locked lock;
    a = polypy_rt_graph_alloc_at(p);
  }
  if (!a) return polypy_rt_fail(cudaErrorInvalidValue);
  if (g)
    for (cudaGraphNode_t node : g->nodes)
      if (node->type == cudaGraphNodeTypeMemFree && node->alloc == a) {
        bool ordered = false;  /* a reuse of the range in between makes a second free legal */
        for (cudaGraphNode_t other : g->nodes)
          if (other->type == cudaGraphNodeTypeMemAlloc && other->alloc == a)
            for (size_t i = 0; i < count; ++i) ordered = ordered || (polypy_rt_reaches(node, other) &&
                                                                     polypy_rt_reaches(other, deps[i]));
        if (!ordered) return polypy_rt_fail(cudaErrorInvalidValue);  /* freed once in a graph */
      }
  cudaError_t e = polypy_rt_graph_add(out, g, deps, count, cudaGraphNodeTypeMemFree);
  if (e != cudaSuccess) return e;
  a->refs += 1;
  (*out)->alloc = a;
  (*out)->work = [a]() { return polypy_rt_graph_free_run(a); };
  return cudaSuccess;
}
static inline cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                  size_t count, void* p) {
  return polypy_rt_add_free(out, g, deps, count, p);
}
static inline cudaError_t cudaGraphMemAllocNodeGetParams(cudaGraphNode_t node, struct cudaMemAllocNodeParams* p) {
  if (!node || !p || node->type != cudaGraphNodeTypeMemAlloc) return polypy_rt_fail(cudaErrorInvalidValue);
  memset(p, 0, sizeof *p);
  p->poolProps.allocType = cudaMemAllocationTypePinned;
  p->poolProps.location.type = cudaMemLocationTypeDevice;
  p->bytesize = node->alloc->size;
  p->dptr = node->alloc->base;
  return cudaSuccess;
}
static inline cudaError_t cudaGraphMemFreeNodeGetParams(cudaGraphNode_t node, void* dptr) {
  if (!node || !dptr || node->type != cudaGraphNodeTypeMemFree) return polypy_rt_fail(cudaErrorInvalidValue);
  *(void**)dptr = node->alloc->base;
  return cudaSuccess;
}
/* Stream capture (parts/pools.h): cudaMallocAsync becomes an allocation node after the stream's
 * captured work, cudaFreeAsync of a graph allocation a free node. */
static inline cudaError_t polypy_rt_capture_malloc(void** p, size_t size, cudaStream_t s) {
  struct polypy_rt_stream_capture* c = polypy_rt_stream_of(s)->capture;
  if (c->sequence->invalidated) return polypy_rt_fail(cudaErrorStreamCaptureInvalidated);
  cudaGraphNode_t node = 0;
  cudaError_t e = polypy_rt_add_alloc(&node, c->sequence->graph, c->tail.data(), c->tail.size(), size, p);
  if (e == cudaSuccess) c->tail.assign(1, node);
  return e;
}
static inline cudaError_t polypy_rt_capture_free(void* p, cudaStream_t s) {
  struct polypy_rt_stream_capture* c = polypy_rt_stream_of(s)->capture;
  if (c->sequence->invalidated) return polypy_rt_fail(cudaErrorStreamCaptureInvalidated);
  bool graph_memory;
  {
    polypy_rt_locked lock;
    graph_memory = polypy_rt_graph_alloc_at(p) != 0;
  }
  if (!graph_memory) return polypy_rt_capture_unsupported(s);  /* cudaMalloc's memory freed in a graph */
  cudaGraphNode_t node = 0;
  cudaError_t e = polypy_rt_add_free(&node, c->sequence->graph, c->tail.data(), c->tail.size(), p);
  if (e == cudaSuccess) c->tail.assign(1, node);
  return e;
}

/* ------------------------------------------------------------------ executable graphs */
/* CUDA: a graph with allocation nodes has at most one executable graph at a time. */
static inline bool polypy_rt_graph_mem_instantiable(cudaGraph_t g) {
  for (cudaGraphNode_t node : g->nodes)
    if (node->type == cudaGraphNodeTypeMemAlloc && node->alloc->execs > 0) return false;
  return true;
}
static inline void polypy_rt_graph_mem_execs(cudaGraph_t g, int change) {
  polypy_rt_locked lock;
  for (cudaGraphNode_t node : g->nodes)
    if (node->type == cudaGraphNodeTypeMemAlloc) {
      node->alloc->execs += change;
      polypy_rt_graph_alloc_settle(node->alloc);
    }
}
/* Before a launch: an allocation of the graph still live from an earlier launch is freed
 * (cudaGraphInstantiateFlagAutoFreeOnLaunch) or makes the launch fail. */
static inline cudaError_t polypy_rt_graph_mem_relaunch(cudaGraph_t g, bool auto_free) {
  polypy_rt_locked lock;
  for (cudaGraphNode_t node : g->nodes) {
    if (node->type != cudaGraphNodeTypeMemAlloc || !node->alloc->live) continue;
    if (!auto_free) return polypy_rt_fail(cudaErrorInvalidValue);
    polypy_rt_graph_free_unlocked(node->alloc);
  }
  return cudaSuccess;
}

/* ------------------------------------------------------------------ device attributes */
static inline cudaError_t cudaDeviceGraphMemTrim(int device) {
  if (device != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  polypy_rt_locked lock;
  std::vector<struct polypy_rt_graph_alloc*> all(*polypy_rt_graph_allocs());
  for (struct polypy_rt_graph_alloc* a : all) {
    if (!a->mapped || a->live) continue;
    polypy_rt_va_unmap(a->base, a->span);
    a->mapped = false;
    polypy_rt_graph_alloc_settle(a);
  }
  return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void* value) {
  if (device != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  if (!value) return polypy_rt_fail(cudaErrorInvalidValue);
  polypy_rt_locked lock;
  unsigned long long used, reserved;
  polypy_rt_graph_mem_count(&used, &reserved);
  switch (attr) {
    case cudaGraphMemAttrUsedMemCurrent: *(unsigned long long*)value = used; return cudaSuccess;
    case cudaGraphMemAttrUsedMemHigh: *(unsigned long long*)value = polypy_rt_graph_mem_marks()->used_high; return cudaSuccess;
    case cudaGraphMemAttrReservedMemCurrent: *(unsigned long long*)value = reserved; return cudaSuccess;
    case cudaGraphMemAttrReservedMemHigh:
      *(unsigned long long*)value = polypy_rt_graph_mem_marks()->reserved_high;
      return cudaSuccess;
    default: return polypy_rt_fail(cudaErrorInvalidValue);
  }
}
/* Only the high-water marks can be set, and only to zero: they restart from the current amount. */
static inline cudaError_t cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void* value) {
  if (device != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  if (!value || *(unsigned long long*)value != 0) return polypy_rt_fail(cudaErrorInvalidValue);
  polypy_rt_locked lock;
  unsigned long long used, reserved;
  polypy_rt_graph_mem_count(&used, &reserved);
  if (attr == cudaGraphMemAttrUsedMemHigh) polypy_rt_graph_mem_marks()->used_high = used;
  else if (attr == cudaGraphMemAttrReservedMemHigh) polypy_rt_graph_mem_marks()->reserved_high = reserved;
  else return polypy_rt_fail(cudaErrorInvalidValue);
  return cudaSuccess;
}
