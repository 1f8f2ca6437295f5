/* polypy runtime: stream capture (part of cuda_runtime.h; the graphs it records into are
 * parts/graphs.h).
 *
 * cudaStreamBeginCapture: the stream's work is recorded instead of run, each piece after the
 * stream's last captured work. An event recorded in a capturing stream marks that work; another
 * stream that waits for the event joins the capture and continues from there (fork), and the
 * origin stream waiting for an event of a joined stream takes that work as its dependency (join).
 * cudaStreamEndCapture checks, as CUDA does, that every joined stream's work has been joined back
 * into the origin stream. */
static inline bool polypy_rt_capturing(cudaStream_t s) {
  struct polypy_rt_stream_capture* c = polypy_rt_stream_of(s)->capture;
  return c != 0;
}
POLYPY_RT_STATE unsigned long long* polypy_rt_capture_ids() { static unsigned long long n = 0; return &n; }
/* The capture sequences going on. */
POLYPY_RT_STATE std::vector<struct polypy_rt_capture_sequence*>* polypy_rt_captures() {
  static std::vector<struct polypy_rt_capture_sequence*> live;
  return &live;
}
static inline cudaError_t polypy_rt_capture(cudaStream_t s, int node_type, std::function<cudaError_t()> work) {
  struct polypy_rt_stream_capture* c = polypy_rt_stream_of(s)->capture;
  if (c->sequence->invalidated) return polypy_rt_fail(cudaErrorStreamCaptureInvalidated);
  cudaGraphNode_t node = 0;
  cudaGraph_t g = c->sequence->graph;
  cudaError_t e = polypy_rt_graph_add(&node, g, c->tail.data(), c->tail.size(), (enum cudaGraphNodeType)node_type);
  if (e != cudaSuccess) return e;
  node->work = work;
  c->tail.assign(1, node);
  return cudaSuccess;
}
/* A launcher's configuration: its first three parameters (grid, block, dynamic shared bytes). */
template <class... PolypyRest>
static inline bool polypy_rt_launch_shape_of(dim3 grid, dim3 block, size_t shmem, const PolypyRest&...) {
  return polypy_rt_launch_shape_ok(grid.x, grid.y, grid.z, block.x, block.y, block.z, shmem);
}
/* A launch given a stream (`K<<<g, b, shmem, s>>>(args)`, translated as
 * `polypy_rt_on_stream(s, K_launch)(dim3(g), dim3(b), shmem, args)`): the launcher's parameters
 * are its own, so the arguments convert as in a direct call; in a capturing stream the launch
 * becomes a kernel node holding the arguments' values. */
template <class... PolypyArgs>
struct polypy_rt_stream_launch {
  cudaStream_t stream;
  void (*launcher)(PolypyArgs...);
  void operator()(PolypyArgs... args) const {
    if (!polypy_rt_capturing(stream)) {
      struct polypy_rt_queue* q = polypy_rt_queue_of(stream);
      if (!q || *polypy_rt_worker_flag()) {
        launcher(args...);
        return;
      }
      /* A created stream: the configuration is checked now, as CUDA checks it at the launch; the
       * launch runs on the stream's worker (which reaches this launcher's check with it valid). */
      if (!polypy_rt_launch_shape_of(args...)) return;
      void (*f)(PolypyArgs...) = launcher;
      polypy_rt_queue_push(q, [f, args...]() { f(args...); });
      return;
    }
    void (*f)(PolypyArgs...) = launcher;
    cudaError_t e = polypy_rt_capture(stream, cudaGraphNodeTypeKernel, [f, args...]() {
      return polypy_rt_node_launch([&]() { f(args...); });
    });
    if (e == cudaSuccess) polypy_rt_stream_of(stream)->capture->tail.back()->function = (const void*)f;
  }
};
template <class... PolypyArgs>
static inline polypy_rt_stream_launch<PolypyArgs...> polypy_rt_on_stream(cudaStream_t s, void (*launcher)(PolypyArgs...)) {
  return polypy_rt_stream_launch<PolypyArgs...>{s, launcher};
}
static inline cudaError_t polypy_rt_capture_unsupported(cudaStream_t s) {
  polypy_rt_stream_of(s)->capture->sequence->invalidated = true;
  return polypy_rt_fail(cudaErrorStreamCaptureUnsupported);
}
static inline void polypy_rt_capture_join(struct polypy_rt_capture_sequence* seq, cudaStream_t s,
                                          const std::vector<cudaGraphNode_t>& tail) {
  struct polypy_rt_stream* stream = polypy_rt_stream_of(s);
  stream->capture = new polypy_rt_stream_capture();
  stream->capture->sequence = seq;
  stream->capture->id = seq->id;
  stream->capture->tail = tail;
  seq->streams.push_back(stream);
}
static inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
  struct polypy_rt_stream* stream = polypy_rt_stream_of(s);
  if (stream == polypy_rt_null_stream()) return polypy_rt_fail(cudaErrorStreamCaptureUnsupported);
  if (stream->capture) return polypy_rt_fail(cudaErrorIllegalState);
  if ((int)mode < 0 || (int)mode > 2) return polypy_rt_fail(cudaErrorInvalidValue);
  struct polypy_rt_capture_sequence* seq = new polypy_rt_capture_sequence();
  cudaGraphCreate(&seq->graph, 0);
  seq->origin = stream;
  seq->mode = mode;
  seq->id = ++*polypy_rt_capture_ids();
  seq->invalidated = false;
  seq->external = false;
  polypy_rt_captures()->push_back(seq);
  polypy_rt_capture_join(seq, stream, std::vector<cudaGraphNode_t>());
  return cudaSuccess;
}
/* Whether `node` is `to` or one of its ancestors in g. */
static inline bool polypy_rt_reaches(cudaGraphNode_t node, cudaGraphNode_t to) {
  if (node == to) return true;
  for (cudaGraphNode_t d : to->deps)
    if (polypy_rt_reaches(node, d)) return true;
  return false;
}
static inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* out) {
  struct polypy_rt_stream* stream = polypy_rt_stream_of(s);
  if (!stream->capture) return polypy_rt_fail(cudaErrorIllegalState);
  struct polypy_rt_capture_sequence* seq = stream->capture->sequence;
  if (!out && !seq->external) return polypy_rt_fail(cudaErrorInvalidValue);
  if (seq->origin != stream) return polypy_rt_fail(cudaErrorStreamCaptureUnmatched);
  bool joined = true;
  for (cudaStream_t other : seq->streams) {
    if (other == stream) continue;
    for (cudaGraphNode_t last : other->capture->tail) {
      bool reached = false;
      for (cudaGraphNode_t end : stream->capture->tail) reached = reached || polypy_rt_reaches(last, end);
      joined = joined && reached;
    }
  }
  for (cudaStream_t other : seq->streams) {
    delete other->capture;
    other->capture = 0;
  }
  if (out) *out = 0;
  cudaError_t e = cudaSuccess;
  if (seq->invalidated) e = cudaErrorStreamCaptureInvalidated;
  else if (!joined) e = cudaErrorStreamCaptureUnjoined;
  if (e == cudaSuccess && out) *out = seq->graph;
  else if (e != cudaSuccess && !seq->external) polypy_rt_graph_free(seq->graph);
  std::vector<struct polypy_rt_capture_sequence*>* live = polypy_rt_captures();
  for (size_t i = 0; i < live->size(); ++i)
    if ((*live)[i] == seq) { live->erase(live->begin() + i); break; }
  delete seq;
  return e == cudaSuccess ? e : polypy_rt_fail(e);
}
static inline cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus* status) {
  if (!status) return polypy_rt_fail(cudaErrorInvalidValue);
  struct polypy_rt_stream_capture* c = polypy_rt_stream_of(s)->capture;
  *status = !c ? cudaStreamCaptureStatusNone
               : c->sequence->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}
/* CUDA 12's form (the dependencies of the stream's next captured work), and CUDA 11's. */
static inline cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus* status,
                                                   unsigned long long* id = 0, cudaGraph_t* graph = 0,
                                                   const cudaGraphNode_t** deps = 0, size_t* count = 0) {
  cudaError_t e = cudaStreamIsCapturing(s, status);
  if (e != cudaSuccess) return e;
  struct polypy_rt_stream_capture* c = polypy_rt_stream_of(s)->capture;
  if (id) *id = c ? c->sequence->id : 0;
  if (graph) *graph = c ? c->sequence->graph : 0;
  if (deps) *deps = c ? c->tail.data() : 0;
  if (count) *count = c ? c->tail.size() : 0;
  return cudaSuccess;
}
/* CUDA 12.3's form with the dependencies' edge data (cudaStreamGetCaptureInfo_v3, and CUDA 13's
 * cudaStreamGetCaptureInfo): every edge here is a default edge, all zero. */
static inline cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus* status,
                                                   unsigned long long* id, cudaGraph_t* graph,
                                                   const cudaGraphNode_t** deps, const struct cudaGraphEdgeData** edges,
                                                   size_t* count) {
  size_t n = 0;
  cudaError_t e = cudaStreamGetCaptureInfo(s, status, id, graph, deps, &n);
  if (e != cudaSuccess) return e;
  static thread_local std::vector<struct cudaGraphEdgeData> zeros;
  zeros.assign(n, cudaGraphEdgeData());
  if (edges) *edges = n ? zeros.data() : 0;
  if (count) *count = n;
  return cudaSuccess;
}
static inline cudaError_t cudaStreamGetCaptureInfo_v3(cudaStream_t s, enum cudaStreamCaptureStatus* status,
                                                      unsigned long long* id, cudaGraph_t* graph,
                                                      const cudaGraphNode_t** deps,
                                                      const struct cudaGraphEdgeData** edges, size_t* count) {
  return cudaStreamGetCaptureInfo(s, status, id, graph, deps, edges, count);
}
/* Capture into the program's graph, after `deps` (CUDA 12.3): cudaStreamEndCapture then leaves
 * the graph to the program. */
static inline cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t s, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                        const struct cudaGraphEdgeData* edges, size_t count,
                                                        enum cudaStreamCaptureMode mode) {
  struct polypy_rt_stream* stream = polypy_rt_stream_of(s);
  if (!g || (count && !deps)) return polypy_rt_fail(cudaErrorInvalidValue);
  for (size_t i = 0; i < count; ++i)
    if (!polypy_rt_graph_has(g, deps[i])) return polypy_rt_fail(cudaErrorInvalidValue);
  for (size_t i = 0; edges && i < count; ++i)
    if (edges[i].from_port || edges[i].to_port || edges[i].type) return polypy_rt_fail(cudaErrorNotSupported);
  if (stream == polypy_rt_null_stream()) return polypy_rt_fail(cudaErrorStreamCaptureUnsupported);
  if (stream->capture) return polypy_rt_fail(cudaErrorIllegalState);
  if ((int)mode < 0 || (int)mode > 2) return polypy_rt_fail(cudaErrorInvalidValue);
  struct polypy_rt_capture_sequence* seq = new polypy_rt_capture_sequence();
  seq->graph = g;
  seq->origin = stream;
  seq->mode = mode;
  seq->id = ++*polypy_rt_capture_ids();
  seq->invalidated = false;
  seq->external = true;
  polypy_rt_captures()->push_back(seq);
  polypy_rt_capture_join(seq, stream, std::vector<cudaGraphNode_t>(deps, deps + count));
  return cudaSuccess;
}
/* The dependencies of the stream's next captured work: `deps` added (cudaStreamAddCaptureDependencies)
 * or instead (cudaStreamSetCaptureDependencies); CUDA 12's form and CUDA 13's with edge data. */
enum cudaStreamUpdateCaptureDependenciesFlags { cudaStreamAddCaptureDependencies = 0, cudaStreamSetCaptureDependencies = 1 };
static inline cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t s, cudaGraphNode_t* deps, size_t count,
                                                              unsigned int flags = 0) {
  struct polypy_rt_stream_capture* c = polypy_rt_stream_of(s)->capture;
  if (!c) return polypy_rt_fail(cudaErrorIllegalState);
  if (flags > 1 || (count && !deps)) return polypy_rt_fail(cudaErrorInvalidValue);
  for (size_t i = 0; i < count; ++i)
    if (!polypy_rt_graph_has(c->sequence->graph, deps[i])) return polypy_rt_fail(cudaErrorInvalidValue);
  if (flags == cudaStreamSetCaptureDependencies) c->tail.clear();
  for (size_t i = 0; i < count; ++i) {
    bool have = false;
    for (cudaGraphNode_t t : c->tail) have = have || t == deps[i];
    if (!have) c->tail.push_back(deps[i]);
  }
  return cudaSuccess;
}
static inline cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t s, cudaGraphNode_t* deps,
                                                              const struct cudaGraphEdgeData* edges, size_t count,
                                                              unsigned int flags) {
  for (size_t i = 0; edges && i < count; ++i)
    if (edges[i].from_port || edges[i].to_port || edges[i].type) return polypy_rt_fail(cudaErrorNotSupported);
  return cudaStreamUpdateCaptureDependencies(s, deps, count, flags);
}
static inline cudaError_t cudaStreamGetCaptureInfo_v2(cudaStream_t s, enum cudaStreamCaptureStatus* status,
                                                      unsigned long long* id = 0, cudaGraph_t* graph = 0,
                                                      const cudaGraphNode_t** deps = 0, size_t* count = 0) {
  return cudaStreamGetCaptureInfo(s, status, id, graph, deps, count);
}
static inline void polypy_rt_capture_record(cudaEvent_t e, cudaStream_t s) {
  struct polypy_rt_stream_capture* c = polypy_rt_stream_of(s)->capture;
  if (e->capture) delete e->capture;
  e->capture = 0;
  if (!c) return;
  e->capture = new polypy_rt_stream_capture(*c);  /* the sequence and the work the event follows */
}
static inline cudaError_t polypy_rt_capture_wait(cudaStream_t s, cudaEvent_t e) {
  struct polypy_rt_stream* stream = polypy_rt_stream_of(s);
  struct polypy_rt_stream_capture* marked = e->capture;
  bool live = false;  /* the event's capture is still going on */
  if (marked)
    for (struct polypy_rt_capture_sequence* seq : *polypy_rt_captures()) live = live || (seq == marked->sequence && seq->id == marked->id);
  if (!live) {  /* an event of finished work: nothing to wait for */
    if (stream->capture && marked) return polypy_rt_capture_unsupported(s);  /* CUDA: cudaErrorStreamCaptureIsolation */
    return cudaSuccess;
  }
  if (!stream->capture) {
    if (stream == polypy_rt_null_stream()) return polypy_rt_fail(cudaErrorStreamCaptureImplicit);
    polypy_rt_capture_join(marked->sequence, stream, marked->tail);  /* fork */
    return cudaSuccess;
  }
  if (stream->capture->sequence != marked->sequence) return polypy_rt_fail(cudaErrorStreamCaptureMerge);
  for (cudaGraphNode_t node : marked->tail) {  /* join: after both */
    bool have = false;
    for (cudaGraphNode_t t : stream->capture->tail) have = have || t == node;
    if (!have) stream->capture->tail.push_back(node);
  }
  return cudaSuccess;
}
/* The calling thread's capture mode, exchanged. The mode decides which calls CUDA treats as
 * unsafe during someone's capture; here every call has its meaning whatever the mode, so the
 * exchange is only kept and returned. */
static inline cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode) {
  static thread_local enum cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
  if (!mode || (int)*mode < 0 || (int)*mode > 2) return polypy_rt_fail(cudaErrorInvalidValue);
  enum cudaStreamCaptureMode previous = current;
  current = *mode;
  *mode = previous;
  return cudaSuccess;
}
