/* polypy runtime: CUDA graphs and stream capture (part of cuda_runtime.h).
 *
 * A graph is a set of nodes (a kernel launch, a copy, a fill, a host function, a child graph, an
 * empty node) and dependencies between them. A node holds its work as a closure over the values
 * of its parameters at the time it was made: a captured launch holds the launcher and the
 * launch's arguments, a copy its pointers and size. Launching an instantiated graph runs every
 * node once, each after the nodes it depends on (a topological order, ties in the order the nodes
 * were made), before cudaGraphLaunch returns: as every stream here, in stream order with the rest
 * of the stream's work.
 *
 * Stream capture, which records into graphs, is parts/capture.h.
 *
 * Kernel nodes made by hand (cudaGraphAddKernelNode): a kernel's address in host code (`(void*)k`)
 * is its host stub (parts/kernels.h), registered with a binder that copies a
 * cudaKernelNodeParams::kernelParams array (one pointer per kernel parameter, CUDA's convention)
 * into the stub's parameter types when the node is made. */
typedef struct polypy_rt_graph* cudaGraph_t;
typedef struct polypy_rt_graph_exec* cudaGraphExec_t;
typedef struct polypy_rt_graph_node* cudaGraphNode_t;
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
                             cudaStreamCaptureModeRelaxed = 2 };
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1,
                               cudaStreamCaptureStatusInvalidated = 2 };
enum cudaGraphExecUpdateResult {
  cudaGraphExecUpdateSuccess = 0, cudaGraphExecUpdateError = 1, cudaGraphExecUpdateErrorTopologyChanged = 2,
  cudaGraphExecUpdateErrorNodeTypeChanged = 3, cudaGraphExecUpdateErrorFunctionChanged = 4,
  cudaGraphExecUpdateErrorParametersChanged = 5, cudaGraphExecUpdateErrorNotSupported = 6,
  cudaGraphExecUpdateErrorUnsupportedFunctionChange = 7, cudaGraphExecUpdateErrorAttributesChanged = 8
};
struct cudaGraphExecUpdateResultInfo {
  enum cudaGraphExecUpdateResult result;
  cudaGraphNode_t errorNode, errorFromNode;
};
enum cudaGraphInstantiateFlags {
  cudaGraphInstantiateFlagAutoFreeOnLaunch = 1, cudaGraphInstantiateFlagUpload = 2,
  cudaGraphInstantiateFlagDeviceLaunch = 4, cudaGraphInstantiateFlagUseNodePriority = 8
};
enum cudaGraphInstantiateResult {
  cudaGraphInstantiateSuccess = 0, cudaGraphInstantiateError = 1, cudaGraphInstantiateInvalidStructure = 2,
  cudaGraphInstantiateNodeOperationNotSupported = 3, cudaGraphInstantiateMultipleDevicesNotSupported = 4
};
struct cudaGraphInstantiateParams {
  unsigned long long flags;
  cudaStream_t uploadStream;
  cudaGraphNode_t errNode_out;
  enum cudaGraphInstantiateResult result_out;
};
#define cudaGraphDebugDotFlagsVerbose 1
struct cudaKernelNodeParams {
  void* func;
  dim3 gridDim, blockDim;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
};
struct cudaMemsetParams { void* dst; size_t pitch; unsigned int value, elementSize; size_t width, height; };
struct cudaHostNodeParams { cudaHostFn_t fn; void* userData; };

/* ------------------------------------------------------------------ kernels by address */
/* What `(void*)k` is in a translated program: k's host stub (parts/kernels.h). The translated code
 * registers each stub with a binder (polypy_rt_kernel_binder) that copies a
 * cudaKernelNodeParams::kernelParams array into the stub's parameter types; the bound node pushes
 * its configuration and calls the stub, as a launch through a pointer does. */
struct polypy_rt_kernel {
  const void* stub;
  std::function<cudaError_t()> (*bind)(const void* stub, dim3 grid, dim3 block, size_t shmem, void** args);
};
static inline void polypy_rt_push_config(dim3 grid, dim3 block, size_t shmem, cudaStream_t stream); /* kernels.h */
/* A launch run as a graph node: the launch's error (an invalid configuration, a failed assert)
 * is the node's. */
template <class PolypyRun>
static inline cudaError_t polypy_rt_node_launch(PolypyRun launch) {
  cudaError_t before = *polypy_rt_last_error();
  *polypy_rt_last_error() = cudaSuccess;
  launch();
  cudaError_t e = *polypy_rt_last_error();
  if (e == cudaSuccess) *polypy_rt_last_error() = before;
  return e;
}
/* The stub's parameter types are given, not deduced: a top-level const (`const int n`) is no part
 * of the function's type, and values are held as their decayed types. */
template <class... PolypyArgs, size_t... PolypyAt>
static inline std::function<cudaError_t()> polypy_rt_bind_at(const void* stub, dim3 grid, dim3 block, size_t shmem,
                                                            void** args, std::index_sequence<PolypyAt...>) {
  void (*f)(PolypyArgs...) = (void (*)(PolypyArgs...))stub;
  std::tuple<typename std::decay<PolypyArgs>::type...> values(*(typename std::decay<PolypyArgs>::type*)args[PolypyAt]...);
  return [=]() {
    return polypy_rt_node_launch([&]() {
      polypy_rt_push_config(grid, block, shmem, 0);
      f(std::get<PolypyAt>(values)...);
    });
  };
}
template <class... PolypyArgs>
static inline std::function<cudaError_t()> polypy_rt_bind(const void* stub, dim3 grid, dim3 block, size_t shmem,
                                                         void** args) {
  return polypy_rt_bind_at<PolypyArgs...>(stub, grid, block, shmem, args, std::index_sequence_for<PolypyArgs...>());
}
POLYPY_RT_STATE std::vector<struct polypy_rt_kernel>* polypy_rt_kernels() {
  static std::vector<struct polypy_rt_kernel> known;
  return &known;
}
/* Made once per kernel by the translated code, at start-up, next to its stub's registration. */
struct polypy_rt_kernel_binder {
  polypy_rt_kernel_binder(const void* stub,
                          std::function<cudaError_t()> (*bind)(const void*, dim3, dim3, size_t, void**)) {
    polypy_rt_kernels()->push_back(polypy_rt_kernel{stub, bind});
  }
};
static inline const struct polypy_rt_kernel* polypy_rt_kernel_of(const void* func) {
  for (const struct polypy_rt_kernel& k : *polypy_rt_kernels())
    if (k.stub == func) return &k;
  return 0;
}

struct polypy_rt_graph_node {
  enum cudaGraphNodeType type;
  std::function<cudaError_t()> work;  /* none for empty and child-graph nodes */
  const void* function;                /* a kernel node's launcher: what cudaGraphExecUpdate compares */
  cudaGraph_t child;                   /* a child-graph node's own copy of its graph */
  std::vector<cudaGraphNode_t> deps;
  struct cudaMemsetParams memset_params;
  struct cudaHostNodeParams host_params;
};
struct polypy_rt_graph { std::vector<cudaGraphNode_t> nodes; };
/* An executable graph: its own copy of the graph, the copy's nodes in the order they run, and, per
 * node of the graph it was made from, its copy (the Exec*SetParams calls name the original). */
struct polypy_rt_graph_exec {
  cudaGraph_t graph;
  std::vector<cudaGraphNode_t> order, originals;
};
/* A capture sequence, shared by the streams that joined it; per stream, its last captured work. */
struct polypy_rt_capture_sequence {
  cudaGraph_t graph;
  cudaStream_t origin;
  enum cudaStreamCaptureMode mode;
  unsigned long long id;
  bool invalidated;
  std::vector<cudaStream_t> streams;
};
struct polypy_rt_stream_capture {
  struct polypy_rt_capture_sequence* sequence;
  unsigned long long id;              /* the sequence's: an event's copy outlives its sequence */
  std::vector<cudaGraphNode_t> tail;  /* what the stream's next captured work depends on */
};

/* ------------------------------------------------------------------ graphs */
static inline bool polypy_rt_graph_has(cudaGraph_t g, cudaGraphNode_t node) {
  for (cudaGraphNode_t x : g->nodes)
    if (x == node) return true;
  return false;
}
static inline cudaError_t polypy_rt_graph_add(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                              size_t count, enum cudaGraphNodeType type) {
  if (!out || !g || (count && !deps)) return polypy_rt_fail(cudaErrorInvalidValue);
  for (size_t i = 0; i < count; ++i) {
    if (!polypy_rt_graph_has(g, deps[i])) return polypy_rt_fail(cudaErrorInvalidValue);
    for (size_t j = 0; j < i; ++j)
      if (deps[j] == deps[i]) return polypy_rt_fail(cudaErrorInvalidValue);  /* CUDA: no duplicate edges */
  }
  cudaGraphNode_t node = new polypy_rt_graph_node();
  node->type = type;
  node->function = 0;
  node->child = 0;
  node->deps.assign(deps, deps + count);
  g->nodes.push_back(node);
  *out = node;
  return cudaSuccess;
}
static inline cudaError_t cudaGraphCreate(cudaGraph_t* g, unsigned int flags) {
  if (!g || flags != 0) return polypy_rt_fail(cudaErrorInvalidValue);
  *g = new polypy_rt_graph();
  return cudaSuccess;
}
static inline void polypy_rt_graph_free(cudaGraph_t g) {
  for (cudaGraphNode_t node : g->nodes) {
    if (node->child) polypy_rt_graph_free(node->child);
    delete node;
  }
  delete g;
}
static inline cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  if (!g) return polypy_rt_fail(cudaErrorInvalidValue);
  polypy_rt_graph_free(g);
  return cudaSuccess;
}
/* A copy of g with the same nodes and edges; `copies`, if given, receives each node's copy. */
static inline cudaGraph_t polypy_rt_graph_copy(cudaGraph_t g, std::vector<cudaGraphNode_t>* copies = 0) {
  cudaGraph_t out = new polypy_rt_graph();
  std::vector<cudaGraphNode_t> made;
  for (cudaGraphNode_t node : g->nodes) {
    cudaGraphNode_t c = new polypy_rt_graph_node(*node);
    c->child = node->child ? polypy_rt_graph_copy(node->child) : 0;
    made.push_back(c);
    out->nodes.push_back(c);
  }
  for (cudaGraphNode_t c : made)  /* edges (an edge added later may point to a later node) */
    for (cudaGraphNode_t& d : c->deps)
      for (size_t i = 0; i < g->nodes.size(); ++i)
        if (g->nodes[i] == d) { d = made[i]; break; }
  if (copies) *copies = made;
  return out;
}
static inline cudaError_t cudaGraphClone(cudaGraph_t* out, cudaGraph_t g) {
  if (!out || !g) return polypy_rt_fail(cudaErrorInvalidValue);
  *out = polypy_rt_graph_copy(g);
  return cudaSuccess;
}
/* The nodes in an order where each comes after its dependencies (ties: the order they were
 * made); false if the dependencies have a cycle. */
static inline bool polypy_rt_graph_order(cudaGraph_t g, std::vector<cudaGraphNode_t>* order) {
  order->clear();
  std::vector<char> done(g->nodes.size(), 0);
  while (order->size() < g->nodes.size()) {
    bool progress = false;
    for (size_t i = 0; i < g->nodes.size(); ++i) {
      if (done[i]) continue;
      bool ready = true;
      for (cudaGraphNode_t d : g->nodes[i]->deps)
        for (size_t j = 0; j < g->nodes.size() && ready; ++j)
          if (g->nodes[j] == d && !done[j]) ready = false;
      if (!ready) continue;
      done[i] = 1;
      order->push_back(g->nodes[i]);
      progress = true;
      break;  /* restart: the earliest-made ready node goes next */
    }
    if (!progress) return false;
  }
  return true;
}
static inline cudaError_t polypy_rt_graph_run(cudaGraph_t g);
static inline cudaError_t polypy_rt_node_run(cudaGraphNode_t node) {
  if (node->type == cudaGraphNodeTypeGraph) return polypy_rt_graph_run(node->child);
  return node->work ? node->work() : cudaSuccess;
}
/* Runs every node of g after its dependencies; the first failure is the result (the rest still run,
 * as the nodes after a failed kernel do on a device). */
static inline cudaError_t polypy_rt_graph_run(cudaGraph_t g) {
  std::vector<cudaGraphNode_t> order;
  if (!polypy_rt_graph_order(g, &order)) return polypy_rt_fail(cudaErrorInvalidValue);
  cudaError_t first = cudaSuccess;
  for (cudaGraphNode_t node : order) {
    cudaError_t e = polypy_rt_node_run(node);
    if (first == cudaSuccess) first = e;
  }
  return first;
}

/* ------------------------------------------------------------------ nodes made by hand */
static inline cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                size_t count) {
  return polypy_rt_graph_add(out, g, deps, count, cudaGraphNodeTypeEmpty);
}
static inline cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                               size_t count, const struct cudaHostNodeParams* p) {
  if (!p || !p->fn) return polypy_rt_fail(cudaErrorInvalidValue);
  cudaError_t e = polypy_rt_graph_add(out, g, deps, count, cudaGraphNodeTypeHost);
  if (e != cudaSuccess) return e;
  struct cudaHostNodeParams q = *p;
  (*out)->host_params = q;
  (*out)->work = [q]() { q.fn(q.userData); return cudaSuccess; };
  return cudaSuccess;
}
static inline cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node, struct cudaHostNodeParams* p) {
  if (!node || !p || node->type != cudaGraphNodeTypeHost) return polypy_rt_fail(cudaErrorInvalidValue);
  *p = node->host_params;
  return cudaSuccess;
}
static inline cudaError_t cudaGraphHostNodeSetParams(cudaGraphNode_t node, const struct cudaHostNodeParams* p) {
  if (!node || !p || !p->fn || node->type != cudaGraphNodeTypeHost) return polypy_rt_fail(cudaErrorInvalidValue);
  struct cudaHostNodeParams q = *p;
  node->host_params = q;
  node->work = [q]() { q.fn(q.userData); return cudaSuccess; };
  return cudaSuccess;
}
static inline cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                 size_t count, const struct cudaMemcpy3DParms* p) {
  if (!p) return polypy_rt_fail(cudaErrorInvalidValue);
  cudaError_t e = polypy_rt_graph_add(out, g, deps, count, cudaGraphNodeTypeMemcpy);
  if (e != cudaSuccess) return e;
  struct cudaMemcpy3DParms q = *p;
  (*out)->work = [q]() { return cudaMemcpy3D(&q); };
  return cudaSuccess;
}
static inline cudaError_t cudaGraphMemcpyNodeSetParams(cudaGraphNode_t node, const struct cudaMemcpy3DParms* p) {
  if (!node || !p || node->type != cudaGraphNodeTypeMemcpy) return polypy_rt_fail(cudaErrorInvalidValue);
  struct cudaMemcpy3DParms q = *p;
  node->work = [q]() { return cudaMemcpy3D(&q); };
  return cudaSuccess;
}
static inline cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                   size_t count, void* dst, const void* src, size_t bytes,
                                                   enum cudaMemcpyKind kind) {
  cudaError_t e = polypy_rt_graph_add(out, g, deps, count, cudaGraphNodeTypeMemcpy);
  if (e != cudaSuccess) return e;
  (*out)->work = [=]() { return cudaMemcpy(dst, src, bytes, kind); };
  return cudaSuccess;
}
static inline cudaError_t cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t node, void* dst, const void* src,
                                                         size_t bytes, enum cudaMemcpyKind kind) {
  if (!node || node->type != cudaGraphNodeTypeMemcpy) return polypy_rt_fail(cudaErrorInvalidValue);
  node->work = [=]() { return cudaMemcpy(dst, src, bytes, kind); };
  return cudaSuccess;
}
/* A fill of `height` rows of `width` elements of 1, 2 or 4 bytes, `pitch` bytes apart, with the
 * value's low elementSize bytes (CUDA's memset node). */
static inline cudaError_t polypy_rt_memset_node(struct cudaMemsetParams p) {
  if (!p.dst || (p.elementSize != 1 && p.elementSize != 2 && p.elementSize != 4) ||
      (p.height > 1 && p.pitch < p.width * p.elementSize))
    return polypy_rt_fail(cudaErrorInvalidValue);
  for (size_t y = 0; y < p.height; ++y) {
    unsigned char* row = (unsigned char*)p.dst + y * p.pitch;
    for (size_t x = 0; x < p.width; ++x) {
      if (p.elementSize == 1) row[x] = (unsigned char)p.value;
      else if (p.elementSize == 2) { uint16_t v = (uint16_t)p.value; memcpy(row + 2 * x, &v, 2); }
      else { uint32_t v = (uint32_t)p.value; memcpy(row + 4 * x, &v, 4); }
    }
  }
  return cudaSuccess;
}
static inline cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                 size_t count, const struct cudaMemsetParams* p) {
  if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4))
    return polypy_rt_fail(cudaErrorInvalidValue);
  cudaError_t e = polypy_rt_graph_add(out, g, deps, count, cudaGraphNodeTypeMemset);
  if (e != cudaSuccess) return e;
  struct cudaMemsetParams q = *p;
  (*out)->memset_params = q;
  (*out)->work = [q]() { return polypy_rt_memset_node(q); };
  return cudaSuccess;
}
static inline cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node, struct cudaMemsetParams* p) {
  if (!node || !p || node->type != cudaGraphNodeTypeMemset) return polypy_rt_fail(cudaErrorInvalidValue);
  *p = node->memset_params;
  return cudaSuccess;
}
static inline cudaError_t cudaGraphMemsetNodeSetParams(cudaGraphNode_t node, const struct cudaMemsetParams* p) {
  if (!node || !p || node->type != cudaGraphNodeTypeMemset) return polypy_rt_fail(cudaErrorInvalidValue);
  struct cudaMemsetParams q = *p;
  node->memset_params = q;
  node->work = [q]() { return polypy_rt_memset_node(q); };
  return cudaSuccess;
}
/* Kernel nodes: the function is a kernel's address as host code takes it (`(void*)k`); the
 * parameters' values are copied now, as CUDA copies them. `extra` (packed parameters) is not
 * supported. */
static inline cudaError_t polypy_rt_kernel_work(cudaGraphNode_t node, const struct cudaKernelNodeParams* p) {
  const struct polypy_rt_kernel* k = p ? polypy_rt_kernel_of(p->func) : 0;
  if (!k || p->extra) return polypy_rt_fail(cudaErrorInvalidValue);
  node->work = k->bind(k->stub, p->gridDim, p->blockDim, p->sharedMemBytes, p->kernelParams);
  node->function = k->stub;
  return cudaSuccess;
}
static inline cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                 size_t count, const struct cudaKernelNodeParams* p) {
  if (!p || !polypy_rt_kernel_of(p->func) || p->extra) return polypy_rt_fail(cudaErrorInvalidValue);
  cudaError_t e = polypy_rt_graph_add(out, g, deps, count, cudaGraphNodeTypeKernel);
  if (e != cudaSuccess) return e;
  return polypy_rt_kernel_work(*out, p);
}
static inline cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node, const struct cudaKernelNodeParams* p) {
  if (!node || node->type != cudaGraphNodeTypeKernel) return polypy_rt_fail(cudaErrorInvalidValue);
  return polypy_rt_kernel_work(node, p);
}
/* The child node holds a copy of the child graph, made now (CUDA clones it too). */
static inline cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                     size_t count, cudaGraph_t child) {
  if (!child || child == g) return polypy_rt_fail(cudaErrorInvalidValue);
  cudaError_t e = polypy_rt_graph_add(out, g, deps, count, cudaGraphNodeTypeGraph);
  if (e != cudaSuccess) return e;
  (*out)->child = polypy_rt_graph_copy(child);
  return cudaSuccess;
}
static inline cudaError_t cudaGraphChildGraphNodeGetGraph(cudaGraphNode_t node, cudaGraph_t* child) {
  if (!node || !child || node->type != cudaGraphNodeTypeGraph) return polypy_rt_fail(cudaErrorInvalidValue);
  *child = node->child;
  return cudaSuccess;
}
static inline cudaError_t cudaGraphAddDependencies(cudaGraph_t g, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                                   size_t count) {
  if (!g || (count && (!from || !to))) return polypy_rt_fail(cudaErrorInvalidValue);
  for (size_t i = 0; i < count; ++i) {
    if (!polypy_rt_graph_has(g, from[i]) || !polypy_rt_graph_has(g, to[i]) || from[i] == to[i])
      return polypy_rt_fail(cudaErrorInvalidValue);
    for (cudaGraphNode_t d : to[i]->deps)
      if (d == from[i]) return polypy_rt_fail(cudaErrorInvalidValue);  /* the edge exists */
  }
  for (size_t i = 0; i < count; ++i) to[i]->deps.push_back(from[i]);
  return cudaSuccess;
}
static inline cudaError_t cudaGraphRemoveDependencies(cudaGraph_t g, const cudaGraphNode_t* from,
                                                      const cudaGraphNode_t* to, size_t count) {
  if (!g || (count && (!from || !to))) return polypy_rt_fail(cudaErrorInvalidValue);
  for (size_t i = 0; i < count; ++i) {
    std::vector<cudaGraphNode_t>& deps = to[i]->deps;
    size_t k = 0;
    while (k < deps.size() && deps[k] != from[i]) ++k;
    if (k == deps.size()) return polypy_rt_fail(cudaErrorInvalidValue);
    deps.erase(deps.begin() + k);
  }
  return cudaSuccess;
}
/* The listing calls: with a null array, the count; else up to *count nodes, and *count is then the
 * number there are (CUDA's convention). */
static inline cudaError_t polypy_rt_node_list(const std::vector<cudaGraphNode_t>& found, cudaGraphNode_t* nodes,
                                              size_t* count) {
  if (!count) return polypy_rt_fail(cudaErrorInvalidValue);
  if (nodes) {
    for (size_t i = 0; i < *count; ++i) nodes[i] = i < found.size() ? found[i] : 0;
    if (*count > found.size()) *count = found.size();
  } else {
    *count = found.size();
  }
  return cudaSuccess;
}
static inline cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* count) {
  if (!g) return polypy_rt_fail(cudaErrorInvalidValue);
  return polypy_rt_node_list(g->nodes, nodes, count);
}
static inline cudaError_t cudaGraphGetRootNodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* count) {
  if (!g) return polypy_rt_fail(cudaErrorInvalidValue);
  std::vector<cudaGraphNode_t> roots;
  for (cudaGraphNode_t node : g->nodes)
    if (node->deps.empty()) roots.push_back(node);
  return polypy_rt_node_list(roots, nodes, count);
}
static inline cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t* deps, size_t* count) {
  if (!node) return polypy_rt_fail(cudaErrorInvalidValue);
  return polypy_rt_node_list(node->deps, deps, count);
}
static inline cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType* type) {
  if (!node || !type) return polypy_rt_fail(cudaErrorInvalidValue);
  *type = node->type;
  return cudaSuccess;
}

/* ------------------------------------------------------------------ executable graphs */
static inline cudaError_t polypy_rt_instantiate(cudaGraphExec_t* out, cudaGraph_t g, unsigned long long flags) {
  if (!out || !g || (flags & ~(unsigned long long)15)) return polypy_rt_fail(cudaErrorInvalidValue);
  if (flags & cudaGraphInstantiateFlagDeviceLaunch) return polypy_rt_fail(cudaErrorNotSupported);  /* no device launch */
  cudaGraphExec_t exec = new polypy_rt_graph_exec();
  exec->graph = polypy_rt_graph_copy(g);
  exec->originals = g->nodes;
  if (!polypy_rt_graph_order(exec->graph, &exec->order)) {
    polypy_rt_graph_free(exec->graph);
    delete exec;
    return polypy_rt_fail(cudaErrorInvalidValue);  /* a cycle */
  }
  *out = exec;
  return cudaSuccess;
}
/* CUDA 12's signature, CUDA 11's (error node and log), cudaGraphInstantiateWithFlags, WithParams. */
static inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* out, cudaGraph_t g, unsigned long long flags = 0) {
  return polypy_rt_instantiate(out, g, flags);
}
static inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* out, cudaGraph_t g, cudaGraphNode_t* error_node,
                                               char* log, size_t log_size) {
  if (error_node) *error_node = 0;
  if (log && log_size) log[0] = 0;
  return polypy_rt_instantiate(out, g, 0);
}
static inline cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* out, cudaGraph_t g,
                                                        unsigned long long flags = 0) {
  return polypy_rt_instantiate(out, g, flags);
}
static inline cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t* out, cudaGraph_t g,
                                                         struct cudaGraphInstantiateParams* p) {
  if (!p) return polypy_rt_fail(cudaErrorInvalidValue);
  cudaError_t e = polypy_rt_instantiate(out, g, p->flags);
  p->errNode_out = 0;
  p->result_out = e == cudaSuccess ? cudaGraphInstantiateSuccess : cudaGraphInstantiateError;
  return e;
}
static inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (!exec) return polypy_rt_fail(cudaErrorInvalidValue);
  polypy_rt_graph_free(exec->graph);
  delete exec;
  return cudaSuccess;
}
static inline cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t s) {
  (void)s;
  return exec ? cudaSuccess : polypy_rt_fail(cudaErrorInvalidValue);
}
static inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  if (!exec) return polypy_rt_fail(cudaErrorInvalidValue);
  if (polypy_rt_capturing(s)) {  /* a child graph of the capture: the executable graph as it is now */
    cudaError_t e = polypy_rt_capture(s, cudaGraphNodeTypeGraph, std::function<cudaError_t()>());
    if (e == cudaSuccess) polypy_rt_stream_of(s)->capture->tail.back()->child = polypy_rt_graph_copy(exec->graph);
    return e;
  }
  cudaError_t first = cudaSuccess;
  for (cudaGraphNode_t node : exec->order) {
    cudaError_t e = polypy_rt_node_run(node);
    if (first == cudaSuccess) first = e;
  }
  return first;
}
/* The executable graph's copy of a node of the graph it was made from. */
static inline cudaGraphNode_t polypy_rt_exec_node(cudaGraphExec_t exec, cudaGraph_t from, cudaGraphNode_t node) {
  (void)from;
  for (size_t i = 0; i < exec->originals.size(); ++i)
    if (exec->originals[i] == node) return exec->graph->nodes[i];
  return 0;
}
static inline cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                         const struct cudaHostNodeParams* p) {
  cudaGraphNode_t mine = exec ? polypy_rt_exec_node(exec, 0, node) : 0;
  if (!mine) return polypy_rt_fail(cudaErrorInvalidValue);
  return cudaGraphHostNodeSetParams(mine, p);
}
static inline cudaError_t cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                           const struct cudaMemsetParams* p) {
  cudaGraphNode_t mine = exec ? polypy_rt_exec_node(exec, 0, node) : 0;
  if (!mine) return polypy_rt_fail(cudaErrorInvalidValue);
  return cudaGraphMemsetNodeSetParams(mine, p);
}
static inline cudaError_t cudaGraphExecMemcpyNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                           const struct cudaMemcpy3DParms* p) {
  cudaGraphNode_t mine = exec ? polypy_rt_exec_node(exec, 0, node) : 0;
  if (!mine) return polypy_rt_fail(cudaErrorInvalidValue);
  return cudaGraphMemcpyNodeSetParams(mine, p);
}
static inline cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst,
                                                             const void* src, size_t bytes, enum cudaMemcpyKind kind) {
  cudaGraphNode_t mine = exec ? polypy_rt_exec_node(exec, 0, node) : 0;
  if (!mine) return polypy_rt_fail(cudaErrorInvalidValue);
  return cudaGraphMemcpyNodeSetParams1D(mine, dst, src, bytes, kind);
}
/* The executable graph's kernel node takes new parameters; its kernel stays the same (CUDA). */
static inline cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                           const struct cudaKernelNodeParams* p) {
  cudaGraphNode_t mine = exec ? polypy_rt_exec_node(exec, 0, node) : 0;
  const struct polypy_rt_kernel* k = p ? polypy_rt_kernel_of(p->func) : 0;
  if (!mine || mine->type != cudaGraphNodeTypeKernel || !k || k->stub != mine->function)
    return polypy_rt_fail(cudaErrorInvalidValue);
  return polypy_rt_kernel_work(mine, p);
}
static inline cudaError_t cudaGraphExecChildGraphNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                               cudaGraph_t child) {
  cudaGraphNode_t mine = exec ? polypy_rt_exec_node(exec, 0, node) : 0;
  if (!mine || !child || mine->type != cudaGraphNodeTypeGraph) return polypy_rt_fail(cudaErrorInvalidValue);
  std::vector<cudaGraphNode_t> order;
  if (!polypy_rt_graph_order(child, &order)) return polypy_rt_fail(cudaErrorInvalidValue);
  polypy_rt_graph_free(mine->child);
  mine->child = polypy_rt_graph_copy(child);
  return cudaSuccess;
}
/* Whether g has exec's graph's shape: as many nodes, of the same types, with the same edges, and
 * kernel nodes launching the same kernels (node i of one matches node i of the other: graphs made
 * by the same code, or captured from the same work, list their nodes in the same order). */
static inline enum cudaGraphExecUpdateResult polypy_rt_update_check(cudaGraph_t mine, cudaGraph_t g,
                                                                    cudaGraphNode_t* error_node) {
  *error_node = 0;
  if (mine->nodes.size() != g->nodes.size()) return cudaGraphExecUpdateErrorTopologyChanged;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    cudaGraphNode_t a = mine->nodes[i], b = g->nodes[i];
    *error_node = b;
    if (a->type != b->type) return cudaGraphExecUpdateErrorNodeTypeChanged;
    if (a->function != b->function) return cudaGraphExecUpdateErrorFunctionChanged;
    if (a->deps.size() != b->deps.size()) return cudaGraphExecUpdateErrorTopologyChanged;
    for (size_t k = 0; k < a->deps.size(); ++k) {
      size_t ia = 0, ib = 0;
      while (mine->nodes[ia] != a->deps[k]) ++ia;
      while (g->nodes[ib] != b->deps[k]) ++ib;
      if (ia != ib) return cudaGraphExecUpdateErrorTopologyChanged;
    }
    if (a->type == cudaGraphNodeTypeGraph) {
      enum cudaGraphExecUpdateResult r = polypy_rt_update_check(a->child, b->child, error_node);
      if (r != cudaGraphExecUpdateSuccess) return r;
    }
  }
  *error_node = 0;
  return cudaGraphExecUpdateSuccess;
}
/* The nodes of g's shape take g's parameters (their work); `originals` now name g's nodes. */
static inline void polypy_rt_update_take(cudaGraph_t mine, cudaGraph_t g) {
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    cudaGraphNode_t a = mine->nodes[i], b = g->nodes[i];
    a->work = b->work;
    a->memset_params = b->memset_params;
    a->host_params = b->host_params;
    if (a->type == cudaGraphNodeTypeGraph) polypy_rt_update_take(a->child, b->child);
  }
}
static inline cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t g,
                                              struct cudaGraphExecUpdateResultInfo* info) {
  if (!exec || !g || !info) return polypy_rt_fail(cudaErrorInvalidValue);
  info->errorFromNode = 0;
  info->result = polypy_rt_update_check(exec->graph, g, &info->errorNode);
  if (info->result != cudaGraphExecUpdateSuccess) return polypy_rt_fail(cudaErrorGraphExecUpdateFailure);
  polypy_rt_update_take(exec->graph, g);
  exec->originals = g->nodes;
  return cudaSuccess;
}
/* CUDA 11's signature. */
static inline cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t g, cudaGraphNode_t* error_node,
                                              enum cudaGraphExecUpdateResult* result) {
  if (!result) return polypy_rt_fail(cudaErrorInvalidValue);
  struct cudaGraphExecUpdateResultInfo info = {cudaGraphExecUpdateSuccess, 0, 0};
  cudaError_t e = cudaGraphExecUpdate(exec, g, &info);
  if (error_node) *error_node = info.errorNode;
  *result = info.result;
  return e;
}

