/* polypy runtime: streams, events, host callbacks, stream-ordered allocation and memory pools,
 * unified-memory hints (part of cuda_runtime.h).
 *
 * A stream the program creates runs its work (launches, asynchronous copies and fills, host
 * functions and callbacks, event records, waits for events) in issue order on its own worker
 * thread, while the host goes on (parts/queues.h); synchronizing waits for it, querying asks
 * whether it is done. The default stream (0, cudaStreamLegacy, cudaStreamPerThread) runs its work
 * before the call returns, after the work issued to blocking streams (the legacy stream's rule).
 * Arguments are checked when a call issues work, as CUDA does (an invalid copy direction is the
 * call's error); an error of work run by a worker is recorded as the last error when it runs. Streams are real objects: each has its flags,
 * priority and attributes, and the API checks them. */
#define CUDART_CB
struct polypy_rt_stream;
typedef struct polypy_rt_stream* cudaStream_t;
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaEventInterprocess 0x04

enum cudaAccessProperty { cudaAccessPropertyNormal = 0, cudaAccessPropertyStreaming = 1, cudaAccessPropertyPersisting = 2 };
struct cudaAccessPolicyWindow {
  void* base_ptr;
  size_t num_bytes;
  float hitRatio;
  enum cudaAccessProperty hitProp, missProp;
};
enum cudaSynchronizationPolicy { cudaSyncPolicyAuto = 1, cudaSyncPolicySpin = 2, cudaSyncPolicyYield = 3,
                                 cudaSyncPolicyBlockingSync = 4 };
enum cudaLaunchAttributeID {
  cudaLaunchAttributeIgnore = 0, cudaLaunchAttributeAccessPolicyWindow = 1, cudaLaunchAttributeCooperative = 2,
  cudaLaunchAttributeSynchronizationPolicy = 3, cudaLaunchAttributePriority = 8
};
typedef enum cudaLaunchAttributeID cudaStreamAttrID;
#define cudaStreamAttributeAccessPolicyWindow cudaLaunchAttributeAccessPolicyWindow
#define cudaStreamAttributeSynchronizationPolicy cudaLaunchAttributeSynchronizationPolicy
#define cudaStreamAttributePriority cudaLaunchAttributePriority
union cudaLaunchAttributeValue {
  char pad[64];
  struct cudaAccessPolicyWindow accessPolicyWindow;
  int cooperative;
  enum cudaSynchronizationPolicy syncPolicy;
  int priority;
};
typedef union cudaLaunchAttributeValue cudaStreamAttrValue;

/* The L2 access policy is kept and read back; a CPU's caches take no such hint. While a stream
 * captures (parts/graphs.h), its work is recorded into the capture's graph instead of run. */
struct polypy_rt_stream_capture;
struct polypy_rt_stream {
  unsigned int flags;
  int priority;
  struct cudaAccessPolicyWindow window;
  enum cudaSynchronizationPolicy sync_policy;
  struct polypy_rt_stream_capture* capture;
  struct polypy_rt_queue* queue;  /* the stream's work (parts/queues.h); none for the default stream */
};
enum cudaGraphNodeType {
  cudaGraphNodeTypeKernel = 0, cudaGraphNodeTypeMemcpy = 1, cudaGraphNodeTypeMemset = 2, cudaGraphNodeTypeHost = 3,
  cudaGraphNodeTypeGraph = 4, cudaGraphNodeTypeEmpty = 5, cudaGraphNodeTypeWaitEvent = 6,
  cudaGraphNodeTypeEventRecord = 7, cudaGraphNodeTypeExtSemaphoreSignal = 8, cudaGraphNodeTypeExtSemaphoreWait = 9,
  cudaGraphNodeTypeMemAlloc = 10, cudaGraphNodeTypeMemFree = 11, cudaGraphNodeTypeBatchMemOp = 12,
  cudaGraphNodeTypeConditional = 13
};
/* parts/graphs.h: whether a stream captures; record a piece of work (a graph node of the type)
 * after the stream's captured work; the run of every translated launch given a stream. */
static inline bool polypy_rt_capturing(cudaStream_t s);
static inline cudaError_t polypy_rt_capture(cudaStream_t s, int node_type, std::function<cudaError_t()> work);
/* The queue of a created stream, or null (the default stream's work runs on the calling thread). */
static inline struct polypy_rt_queue* polypy_rt_queue_of(cudaStream_t s);
/* The default stream's work runs now: after the blocking streams' work (the legacy stream), or
 * at once (cudaStreamPerThread, which waits for no other stream). */
static inline void polypy_rt_default_stream_wait(cudaStream_t s) {
  if (s != cudaStreamPerThread) polypy_rt_legacy_wait();
}
/* Work that runs on the calling thread although s names a created stream (a cooperative launch,
 * a graph's launch): it waits for the stream's work issued before it, then runs. */
static inline void polypy_rt_stream_drain(cudaStream_t s) {
  struct polypy_rt_queue* q = polypy_rt_queue_of(s);
  if (!q) polypy_rt_default_stream_wait(s);
  else if (!*polypy_rt_worker_flag()) polypy_rt_queue_wait(q, polypy_rt_queue_ticket(q));
}
/* The work a stream-ordered call does: recorded while the stream captures; issued to a created
 * stream's queue (the call returns cudaSuccess; the work's error is recorded when it runs); on the
 * default stream, run now. */
#define POLYPY_RT_STREAM_WORK(s, type, ...)                                                         \
  do {                                                                                              \
    if (polypy_rt_capturing(s)) return polypy_rt_capture((s), (type), [=]() { return (__VA_ARGS__); }); \
    if (struct polypy_rt_queue* polypy_q = polypy_rt_queue_of(s)) {                                 \
      polypy_rt_queue_push(polypy_q, [=]() { (void)(__VA_ARGS__); });                              \
      return cudaSuccess;                                                                           \
    }                                                                                               \
    polypy_rt_default_stream_wait(s);                                                               \
    return (__VA_ARGS__);                                                                           \
  } while (0)
static inline struct polypy_rt_stream* polypy_rt_null_stream(void) {
  static struct polypy_rt_stream s = {cudaStreamDefault, 0, {0, 0, 0.0f, cudaAccessPropertyNormal,
                                                             cudaAccessPropertyNormal}, cudaSyncPolicyAuto};
  return &s;
}
/* The stream a handle names: the null, legacy and per-thread streams are the one default stream. */
static inline struct polypy_rt_stream* polypy_rt_stream_of(cudaStream_t s) {
  return s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread ? polypy_rt_null_stream() : s;
}
static inline struct polypy_rt_queue* polypy_rt_queue_of(cudaStream_t s) { return polypy_rt_stream_of(s)->queue; }
static inline cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int priority) {
  if (!s) return polypy_rt_fail(cudaErrorInvalidValue);
  *s = 0;  /* written on every path: a launch given the stream reads it (parts/graphs.h) */
  if (flags & ~(unsigned int)cudaStreamNonBlocking) return polypy_rt_fail(cudaErrorInvalidValue);
  struct polypy_rt_stream* stream = (struct polypy_rt_stream*)calloc(1, sizeof(struct polypy_rt_stream));
  if (!stream) return polypy_rt_fail(cudaErrorMemoryAllocation);
  stream->flags = flags;
  stream->priority = 0;  /* clamped to the range cudaDeviceGetStreamPriorityRange gives: [0, 0] */
  (void)priority;
  stream->sync_policy = cudaSyncPolicyAuto;
  stream->queue = polypy_rt_queue_new(!(flags & cudaStreamNonBlocking));
  *s = stream;
  return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  return cudaStreamCreateWithPriority(s, flags, 0);
}
static inline cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithPriority(s, cudaStreamDefault, 0); }
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (polypy_rt_stream_of(s) == polypy_rt_null_stream()) return polypy_rt_fail(cudaErrorInvalidResourceHandle);
  polypy_rt_queue_close(s->queue);  /* as in CUDA, the work issued still runs; the call does not wait */
  free(s);
  return cudaSuccess;
}
/* A capturing stream cannot be waited for: as in CUDA, the call fails and invalidates the capture. */
static inline cudaError_t polypy_rt_capture_unsupported(cudaStream_t s);
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (polypy_rt_capturing(s)) return polypy_rt_capture_unsupported(s);
  polypy_rt_stream_drain(s);
  return *polypy_rt_sticky_error();
}
/* cudaErrorNotReady while work issued to the stream is not done (the default stream's is). */
static inline cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (polypy_rt_capturing(s)) return polypy_rt_capture_unsupported(s);
  struct polypy_rt_queue* q = polypy_rt_queue_of(s);
  if (q && !polypy_rt_queue_reached(q, polypy_rt_queue_ticket(q))) return cudaErrorNotReady;
  return *polypy_rt_sticky_error();
}
static inline cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int* flags) {
  if (!flags) return polypy_rt_fail(cudaErrorInvalidValue);
  *flags = polypy_rt_stream_of(s)->flags;
  return cudaSuccess;
}
static inline cudaError_t cudaStreamGetPriority(cudaStream_t s, int* priority) {
  if (!priority) return polypy_rt_fail(cudaErrorInvalidValue);
  *priority = polypy_rt_stream_of(s)->priority;
  return cudaSuccess;
}
/* Streams have no priorities here (streamPrioritiesSupported is 0): CUDA then gives [0, 0]. */
static inline cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = 0;
  return cudaSuccess;
}
static inline cudaError_t cudaStreamSetAttribute(cudaStream_t s, cudaStreamAttrID attr, const cudaStreamAttrValue* v) {
  if (!v) return polypy_rt_fail(cudaErrorInvalidValue);
  struct polypy_rt_stream* stream = polypy_rt_stream_of(s);
  switch (attr) {
    case cudaLaunchAttributeAccessPolicyWindow: stream->window = v->accessPolicyWindow; return cudaSuccess;
    case cudaLaunchAttributeSynchronizationPolicy: stream->sync_policy = v->syncPolicy; return cudaSuccess;
    case cudaLaunchAttributePriority: return cudaSuccess;  /* clamped to 0, as above */
    default: return polypy_rt_fail(cudaErrorInvalidValue);
  }
}
static inline cudaError_t cudaStreamGetAttribute(cudaStream_t s, cudaStreamAttrID attr, cudaStreamAttrValue* v) {
  if (!v) return polypy_rt_fail(cudaErrorInvalidValue);
  struct polypy_rt_stream* stream = polypy_rt_stream_of(s);
  memset(v, 0, sizeof *v);
  switch (attr) {
    case cudaLaunchAttributeAccessPolicyWindow: v->accessPolicyWindow = stream->window; return cudaSuccess;
    case cudaLaunchAttributeSynchronizationPolicy: v->syncPolicy = stream->sync_policy; return cudaSuccess;
    case cudaLaunchAttributePriority: v->priority = stream->priority; return cudaSuccess;
    default: return polypy_rt_fail(cudaErrorInvalidValue);
  }
}
static inline cudaError_t cudaStreamCopyAttributes(cudaStream_t dst, cudaStream_t src) {
  struct polypy_rt_stream *d = polypy_rt_stream_of(dst), *s = polypy_rt_stream_of(src);
  d->window = s->window;
  d->sync_policy = s->sync_policy;
  d->priority = s->priority;
  return cudaSuccess;
}
static inline cudaError_t cudaStreamGetDevice(cudaStream_t s, int* device) {
  (void)s;
  if (!device) return polypy_rt_fail(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}
/* A stream's id: its address (unique while it lives); the default stream's is 0. */
static inline cudaError_t cudaStreamGetId(cudaStream_t s, unsigned long long* id) {
  if (!id) return polypy_rt_fail(cudaErrorInvalidValue);
  *id = polypy_rt_stream_of(s) == polypy_rt_null_stream() ? 0 : (unsigned long long)(uintptr_t)s;
  return cudaSuccess;
}
static inline cudaError_t cudaCtxResetPersistingL2Cache(void) { return cudaSuccess; }

/* Host callbacks, in stream order: on a created stream its worker runs them after the work issued
 * before them; on the default stream they run now. A callback receives the stream's status: the
 * sticky error of a failed kernel, if any. */
typedef void (CUDART_CB* cudaStreamCallback_t)(cudaStream_t stream, cudaError_t status, void* userData);
typedef void (CUDART_CB* cudaHostFn_t)(void* userData);
static inline cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t callback, void* data,
                                                unsigned int flags) {
  if (!callback || flags != 0) return polypy_rt_fail(cudaErrorInvalidValue);
  if (polypy_rt_capturing(s)) return polypy_rt_capture_unsupported(s);  /* as in CUDA */
  if (struct polypy_rt_queue* q = polypy_rt_queue_of(s)) {
    polypy_rt_queue_push(q, [s, callback, data]() { callback(s, *polypy_rt_sticky_error(), data); });
    return cudaSuccess;
  }
  polypy_rt_default_stream_wait(s);
  callback(s, *polypy_rt_sticky_error(), data);
  return cudaSuccess;
}
static inline cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* data) {
  if (!fn) return polypy_rt_fail(cudaErrorInvalidValue);
  POLYPY_RT_STREAM_WORK(s, cudaGraphNodeTypeHost, (fn(data), cudaSuccess));
}

/* ------------------------------------------------------------------ events */
/* An event recorded in a capturing stream marks the captured work before it (parts/graphs.h):
 * a stream that waits for it joins the capture after that work (fork and join across streams). */
/* An event recorded in a created stream: its queue and ticket; the worker sets ms when it gets there. */
struct polypy_rt_event {
  double ms; unsigned int flags; int recorded; struct polypy_rt_stream_capture* capture;
  struct polypy_rt_queue* on; unsigned long long ticket;
  unsigned long long generation;  /* records so far: a worker sets ms only for the latest record */
};
typedef struct polypy_rt_event* cudaEvent_t;
/* Whether the work an event marks is done (an event never recorded marks none). */
static inline bool polypy_rt_event_done(cudaEvent_t e) { return !e->on || polypy_rt_queue_reached(e->on, e->ticket); }
static inline void polypy_rt_capture_record(cudaEvent_t e, cudaStream_t s);
static inline cudaError_t polypy_rt_capture_wait(cudaStream_t s, cudaEvent_t e);
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  if (!e || (flags & ~(unsigned int)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)))
    return polypy_rt_fail(cudaErrorInvalidValue);
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)) return polypy_rt_fail(cudaErrorInvalidValue);
  *e = (cudaEvent_t)calloc(1, sizeof(struct polypy_rt_event));
  if (!*e) return polypy_rt_fail(cudaErrorMemoryAllocation);
  (*e)->flags = flags;
  return cudaSuccess;
}
static inline cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (!e) return polypy_rt_fail(cudaErrorInvalidResourceHandle);
  if (e->on && !polypy_rt_event_done(e)) {  /* as in CUDA, the record still happens: freed after it */
    polypy_rt_queue_push(e->on, [e]() { free(e); });
    return cudaSuccess;
  }
  free(e);
  return cudaSuccess;
}
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0) {
  if (!e) return polypy_rt_fail(cudaErrorInvalidResourceHandle);
  polypy_rt_capture_record(e, s);
  if (polypy_rt_capturing(s)) return cudaSuccess;
  e->recorded = 1;
  unsigned long long generation = __atomic_add_fetch(&e->generation, 1, __ATOMIC_ACQ_REL);
  if (struct polypy_rt_queue* q = polypy_rt_queue_of(s)) {
    e->on = q;
    e->ticket = polypy_rt_queue_push(q, [e, generation]() {
      if (__atomic_load_n(&e->generation, __ATOMIC_ACQUIRE) == generation) e->ms = polypy_rt_now_ms();
    });
    return cudaSuccess;
  }
  polypy_rt_default_stream_wait(s);
  e->on = 0;
  e->ms = polypy_rt_now_ms();
  return cudaSuccess;
}
static inline cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s = 0, unsigned int flags = 0) {
  (void)flags;
  return cudaEventRecord(e, s);
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (!e) return polypy_rt_fail(cudaErrorInvalidResourceHandle);
  if (e->on && !*polypy_rt_worker_flag()) polypy_rt_queue_wait(e->on, e->ticket);
  return *polypy_rt_sticky_error();
}
static inline cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (!e) return polypy_rt_fail(cudaErrorInvalidResourceHandle);
  return polypy_rt_event_done(e) ? *polypy_rt_sticky_error() : cudaErrorNotReady;
}
/* The stream's later work waits for the event's work: a created stream's worker waits for it; the
 * default stream's caller does (its work runs before the call returns). */
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags = 0) {
  if (!e) return polypy_rt_fail(cudaErrorInvalidResourceHandle);
  if (flags != 0) return polypy_rt_fail(cudaErrorInvalidValue);
  if (polypy_rt_capturing(s) || e->capture) return polypy_rt_capture_wait(s, e);
  if (!e->on) return cudaSuccess;
  struct polypy_rt_queue *on = e->on, *q = polypy_rt_queue_of(s);
  unsigned long long ticket = e->ticket;
  if (q == on) return cudaSuccess;  /* the stream's own earlier work */
  if (q) polypy_rt_queue_push(q, [on, ticket]() { polypy_rt_queue_wait(on, ticket); });
  else if (!*polypy_rt_worker_flag()) polypy_rt_queue_wait(on, ticket);
  return cudaSuccess;
}
/* CUDA's rules: both events recorded, neither made with cudaEventDisableTiming. */
static inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return polypy_rt_fail(cudaErrorInvalidValue);
  if (!start || !end || (start->flags & cudaEventDisableTiming) || (end->flags & cudaEventDisableTiming))
    return polypy_rt_fail(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return polypy_rt_fail(cudaErrorInvalidResourceHandle);
  if (!polypy_rt_event_done(start) || !polypy_rt_event_done(end)) return polypy_rt_fail(cudaErrorNotReady);
  *ms = (float)(end->ms - start->ms);
  return cudaSuccess;
}

/* ------------------------------------------------------------------ asynchronous copies */
/* As in CUDA, the arguments are checked at the call, which returns the error (direction, null
 * pointers, ranges past a known block: polypy_rt_check_copy); only what goes wrong while the
 * work runs is left for the worker to record. */
static inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                                          cudaStream_t s = 0) {
  cudaError_t bad = polypy_rt_check_copy(dst, src, count, kind);
  if (bad != cudaSuccess) return bad;
  POLYPY_RT_STREAM_WORK(s, cudaGraphNodeTypeMemcpy, cudaMemcpy(dst, src, count, kind));
}
static inline cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t s = 0) {
  cudaError_t bad = polypy_rt_check_fill(dst, count);
  if (bad != cudaSuccess) return bad;
  POLYPY_RT_STREAM_WORK(s, cudaGraphNodeTypeMemset, cudaMemset(dst, value, count));
}
template <class T>
static inline cudaError_t cudaMemcpyToSymbolAsync(T& symbol, const void* src, size_t count, size_t offset = 0,
                                                  enum cudaMemcpyKind kind = cudaMemcpyHostToDevice, cudaStream_t s = 0) {
  cudaError_t bad = polypy_rt_check_symbol(src, count, offset, sizeof(T), kind, 1);
  if (bad != cudaSuccess) return bad;
  T* at = &symbol;
  POLYPY_RT_STREAM_WORK(s, cudaGraphNodeTypeMemcpy, cudaMemcpyToSymbol(*at, src, count, offset, kind));
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                                    enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost, cudaStream_t s = 0) {
  cudaError_t bad = polypy_rt_check_symbol(dst, count, offset, sizeof(T), kind, 0);
  if (bad != cudaSuccess) return bad;
  const T* at = &symbol;
  POLYPY_RT_STREAM_WORK(s, cudaGraphNodeTypeMemcpy, cudaMemcpyFromSymbol(dst, *at, count, offset, kind));
}

#include "pools.h"
