/* polypy runtime: CUDA graphs (part of cuda_runtime.h).
 *
 * A graph is a set of nodes (a kernel launch, a copy, a fill, a host function, a child graph, an
 * empty node, an allocation or a free, a conditional node) and dependencies between them. A node
 * holds its work as a closure over the values of its parameters at the time it was made: a
 * captured launch holds the launcher and the launch's arguments, a copy its pointers and size.
 * Launching an instantiated graph runs every node once, each after the nodes it depends on (a
 * topological order, ties in the order the nodes were made), before cudaGraphLaunch returns: as
 * every stream here, in stream order with the rest of the stream's work.
 *
 * This part: the graph's structures, kernels by address, making, copying, ordering and running
 * graphs. Nodes made by hand are parts/graph_nodes.h, executable graphs parts/graph_exec.h,
 * stream capture parts/capture.h, memory nodes parts/graph_memory.h, conditional nodes and
 * cudaGraphAddNode parts/graph_conditional.h.
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
/* Memory nodes (parts/graph_memory.h), conditional handles (parts/graph_conditional.h). */
typedef unsigned long long cudaGraphConditionalHandle;
enum cudaGraphMemAttributeType {
  cudaGraphMemAttrUsedMemCurrent = 0, cudaGraphMemAttrUsedMemHigh = 1, cudaGraphMemAttrReservedMemCurrent = 2,
  cudaGraphMemAttrReservedMemHigh = 3
};
struct cudaMemAllocNodeParams {
  struct cudaMemPoolProps poolProps;
  const struct cudaMemAccessDesc* accessDescs;
  size_t accessDescCount, bytesize;
  void* dptr;
};
/* An edge's data (CUDA 12.3): only default edges, all zero, are implemented. */
struct cudaGraphEdgeData { unsigned char from_port, to_port, type, reserved[5]; };
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
  cudaError_t before = *polypy_rt_last_error(), sticky = *polypy_rt_sticky_error();
  *polypy_rt_last_error() = cudaSuccess;
  launch();
  cudaError_t e = *polypy_rt_last_error();
  if (e == cudaSuccess && *polypy_rt_sticky_error() != sticky) e = *polypy_rt_sticky_error(); /* a kernel's thread's */
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

struct polypy_rt_graph_alloc;  /* parts/graph_memory.h */
struct polypy_rt_condition;    /* parts/graph_conditional.h */
struct polypy_rt_graph_node {
  enum cudaGraphNodeType type;
  std::function<cudaError_t()> work;  /* none for empty, child-graph and conditional nodes */
  const void* function;                /* a kernel node's launcher: what cudaGraphExecUpdate compares */
  cudaGraph_t child;                   /* a child-graph node's own copy of its graph */
  std::vector<cudaGraphNode_t> deps;
  struct cudaMemsetParams memset_params;
  struct cudaHostNodeParams host_params;
  struct polypy_rt_graph_alloc* alloc;      /* allocation and free nodes: the allocation */
  struct polypy_rt_condition* condition;    /* a conditional node: its handle's condition */
  int conditional_type;                     /* enum cudaGraphConditionalNodeType */
  std::vector<cudaGraph_t> bodies;          /* a conditional node's body graphs, its own */
};
/* `conditions`: the conditional handles made for this graph (cudaGraphConditionalHandleCreate);
 * a copy of the graph names the same ones. */
struct polypy_rt_graph {
  std::vector<cudaGraphNode_t> nodes;
  std::vector<struct polypy_rt_condition*> conditions;
};
/* An executable graph: its own copy of the graph, the copy's nodes in the order they run, and, per
 * node of the graph it was made from, its copy (the Exec*SetParams calls name the original);
 * the instantiation flags (cudaGraphInstantiateFlagAutoFreeOnLaunch). */
struct polypy_rt_graph_exec {
  cudaGraph_t graph;
  std::vector<cudaGraphNode_t> order, originals;
  unsigned long long flags;
};
/* parts/graph_memory.h: an allocation node's copy holds its allocation, a node's end lets it go;
 * parts/graph_conditional.h: a conditional node's run. */
static inline void polypy_rt_graph_alloc_hold(struct polypy_rt_graph_alloc* a);
static inline void polypy_rt_graph_alloc_drop(struct polypy_rt_graph_alloc* a);
static inline cudaError_t polypy_rt_conditional_run(cudaGraphNode_t node);
/* A capture sequence, shared by the streams that joined it; per stream, its last captured work. */
struct polypy_rt_capture_sequence {
  cudaGraph_t graph;
  cudaStream_t origin;
  enum cudaStreamCaptureMode mode;
  unsigned long long id;
  bool invalidated;
  bool external;  /* cudaStreamBeginCaptureToGraph: the graph is the program's */
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
  node->alloc = 0;
  node->condition = 0;
  node->conditional_type = 0;
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
    for (cudaGraph_t body : node->bodies) polypy_rt_graph_free(body);
    if (node->alloc) polypy_rt_graph_alloc_drop(node->alloc);
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
    for (cudaGraph_t& body : c->bodies) body = polypy_rt_graph_copy(body);
    if (c->alloc) polypy_rt_graph_alloc_hold(c->alloc);
    made.push_back(c);
    out->nodes.push_back(c);
  }
  for (cudaGraphNode_t c : made)  /* edges (an edge added later may point to a later node) */
    for (cudaGraphNode_t& d : c->deps)
      for (size_t i = 0; i < g->nodes.size(); ++i)
        if (g->nodes[i] == d) { d = made[i]; break; }
  if (copies) *copies = made;
  out->conditions = g->conditions;
  return out;
}
/* Whether g holds allocation or free nodes, or conditional nodes (in graphs inside it too). */
static inline bool polypy_rt_graph_has(cudaGraph_t g, enum cudaGraphNodeType type) {
  for (cudaGraphNode_t node : g->nodes) {
    if (node->type == type) return true;
    if (node->child && polypy_rt_graph_has(node->child, type)) return true;
    for (cudaGraph_t body : node->bodies)
      if (polypy_rt_graph_has(body, type)) return true;
  }
  return false;
}
static inline bool polypy_rt_graph_has_memory_nodes(cudaGraph_t g) {
  return polypy_rt_graph_has(g, cudaGraphNodeTypeMemAlloc) || polypy_rt_graph_has(g, cudaGraphNodeTypeMemFree);
}
/* A clone of a graph with memory nodes would share its allocations' fixed addresses with the
 * original: not implemented (cudaErrorNotSupported). */
static inline cudaError_t cudaGraphClone(cudaGraph_t* out, cudaGraph_t g) {
  if (!out || !g) return polypy_rt_fail(cudaErrorInvalidValue);
  if (polypy_rt_graph_has_memory_nodes(g)) return polypy_rt_fail(cudaErrorNotSupported);
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
  if (node->type == cudaGraphNodeTypeConditional) return polypy_rt_conditional_run(node);
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

