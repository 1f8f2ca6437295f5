/* polypy runtime: conditional nodes and nodes made from cudaGraphNodeParams (part of
 * cuda_runtime.h; CUDA 12.3's IF and WHILE, CUDA 12.8's IF/ELSE and SWITCH).
 *
 * A conditional handle names a condition: an unsigned int, the handle being its address. A
 * kernel sets it with cudaGraphSetConditional(handle, value), which the frontend lowers to a
 * store of the value through the handle (frontend/lower/calls.py: a kernel's handle parameter is
 * a pointer to the condition). A conditional node runs, when its turn comes, its body graphs by
 * the condition's value then: IF runs body 0 when it is not zero (body 1, if there is one, when it
 * is), WHILE runs body 0 as long as it is not zero (tested before each run), SWITCH runs body n
 * when it is n (none when it is out of range). With cudaGraphCondAssignDefault, each launch of the
 * executable graph first sets the condition to the handle's default value; without it, CUDA
 * leaves the value at a launch's start undefined, and here it is the value it last had.
 *
 * The body graphs belong to the node; the node's copy (an executable graph's) has copies of them,
 * which name the same conditions: executable graphs of one graph share their conditions (they
 * run one at a time, each launch complete before cudaGraphLaunch returns). */
enum cudaGraphConditionalNodeType { cudaGraphCondTypeIf = 0, cudaGraphCondTypeWhile = 1, cudaGraphCondTypeSwitch = 2 };
enum cudaGraphConditionalHandleFlags { cudaGraphCondAssignDefault = 1 };
struct polypy_rt_condition { unsigned int value, default_value, flags; };
static inline cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle* out, cudaGraph_t g,
                                                           unsigned int default_value = 0, unsigned int flags = 0) {
  if (!out || !g || (flags & ~(unsigned int)cudaGraphCondAssignDefault)) return polypy_rt_fail(cudaErrorInvalidValue);
  struct polypy_rt_condition* c = 0;  /* device memory, as kernels store to it (and the emulator checks) */
  cudaError_t e = cudaMalloc((void**)&c, sizeof(struct polypy_rt_condition));
  if (e != cudaSuccess) return e;
  *c = polypy_rt_condition{default_value, default_value, flags};
  g->conditions.push_back(c);
  *out = (cudaGraphConditionalHandle)(uintptr_t)c;
  return cudaSuccess;
}
static inline struct polypy_rt_condition* polypy_rt_condition_of(cudaGraphConditionalHandle h) {
  return (struct polypy_rt_condition*)(uintptr_t)h;
}

struct cudaConditionalNodeParams {
  cudaGraphConditionalHandle handle;
  enum cudaGraphConditionalNodeType type;
  unsigned int size;
  cudaGraph_t* phGraph_out;
};
static inline cudaError_t polypy_rt_run_body(cudaGraph_t body) { return polypy_rt_graph_run(body); }
static inline cudaError_t polypy_rt_conditional_run(cudaGraphNode_t node) {
  struct polypy_rt_condition* c = node->condition;
  size_t size = node->bodies.size();
  switch (node->conditional_type) {
    case cudaGraphCondTypeIf:
      if (c->value) return polypy_rt_run_body(node->bodies[0]);
      return size == 2 ? polypy_rt_run_body(node->bodies[1]) : cudaSuccess;
    case cudaGraphCondTypeWhile:
      while (c->value) {
        cudaError_t e = polypy_rt_run_body(node->bodies[0]);
        if (e != cudaSuccess) return e;
      }
      return cudaSuccess;
    default:
      return c->value < size ? polypy_rt_run_body(node->bodies[c->value]) : cudaSuccess;
  }
}
/* A launch's start: the conditions with cudaGraphCondAssignDefault take their default value. */
static inline void polypy_rt_conditions_reset(cudaGraph_t g) {
  for (struct polypy_rt_condition* c : g->conditions)
    if (c->flags & cudaGraphCondAssignDefault) c->value = c->default_value;
  for (cudaGraphNode_t node : g->nodes) {
    if (node->child) polypy_rt_conditions_reset(node->child);
    for (cudaGraph_t body : node->bodies) polypy_rt_conditions_reset(body);
  }
}
/* Node types a conditional body may hold (CUDA): kernels, empty nodes, child graphs, fills,
 * copies and conditional nodes, in the bodies' graphs too. Checked at instantiation. */
static inline bool polypy_rt_body_allowed(cudaGraph_t g) {
  for (cudaGraphNode_t node : g->nodes) {
    switch (node->type) {
      case cudaGraphNodeTypeKernel: case cudaGraphNodeTypeEmpty: case cudaGraphNodeTypeMemset:
      case cudaGraphNodeTypeMemcpy: break;
      case cudaGraphNodeTypeGraph: if (!polypy_rt_body_allowed(node->child)) return false; break;
      case cudaGraphNodeTypeConditional:
        for (cudaGraph_t body : node->bodies)
          if (!polypy_rt_body_allowed(body)) return false;
        break;
      default: return false;
    }
  }
  return true;
}
static inline bool polypy_rt_conditionals_valid(cudaGraph_t g) {
  for (cudaGraphNode_t node : g->nodes) {
    if (node->child && !polypy_rt_conditionals_valid(node->child)) return false;
    for (cudaGraph_t body : node->bodies)
      if (!polypy_rt_body_allowed(body) || !polypy_rt_conditionals_valid(body)) return false;
  }
  return true;
}
static inline cudaError_t polypy_rt_add_conditional(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                    size_t count, struct cudaConditionalNodeParams* p) {
  struct polypy_rt_condition* c = polypy_rt_condition_of(p->handle);
  bool sized = (p->type == cudaGraphCondTypeIf && (p->size == 1 || p->size == 2)) ||
               (p->type == cudaGraphCondTypeWhile && p->size == 1) || (p->type == cudaGraphCondTypeSwitch && p->size > 0);
  if (!p->handle || !sized) return polypy_rt_fail(cudaErrorInvalidValue);
  cudaError_t e = polypy_rt_graph_add(out, g, deps, count, cudaGraphNodeTypeConditional);
  if (e != cudaSuccess) return e;
  cudaGraphNode_t node = *out;
  node->condition = c;
  node->conditional_type = p->type;
  for (unsigned int i = 0; i < p->size; ++i) {
    cudaGraph_t body = new polypy_rt_graph();
    body->conditions = g->conditions;  /* the bodies may use the handles of the graph around them */
    node->bodies.push_back(body);
  }
  p->phGraph_out = node->bodies.data();  /* valid as long as the node (CUDA) */
  return cudaSuccess;
}

/* ------------------------------------------------------------------ nodes from cudaGraphNodeParams */
struct cudaKernelNodeParamsV2 {
  void* func;
  dim3 gridDim, blockDim;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
};
struct cudaMemcpyNodeParams { int flags; int reserved[3]; struct cudaMemcpy3DParms copyParams; };
struct cudaMemsetParamsV2 { void* dst; size_t pitch; unsigned int value, elementSize; size_t width, height; };
struct cudaHostNodeParamsV2 { cudaHostFn_t fn; void* userData; };
struct cudaChildGraphNodeParams { cudaGraph_t graph; };
struct cudaMemAllocNodeParamsV2 {
  struct cudaMemPoolProps poolProps;
  const struct cudaMemAccessDesc* accessDescs;
  size_t accessDescCount, bytesize;
  void* dptr;
};
struct cudaMemFreeNodeParams { void* dptr; };
struct cudaGraphNodeParams {
  enum cudaGraphNodeType type;
  int reserved0[3];
  union {
    long long reserved1[29];
    struct cudaKernelNodeParamsV2 kernel;
    struct cudaMemcpyNodeParams memcpy;
    struct cudaMemsetParamsV2 memset;
    struct cudaHostNodeParamsV2 host;
    struct cudaChildGraphNodeParams graph;
    struct cudaMemAllocNodeParamsV2 alloc;
    struct cudaMemFreeNodeParams free;
    struct cudaConditionalNodeParams conditional;
  };
  long long reserved2;
};
/* Each type as its own call makes it; event and semaphore nodes are not implemented
 * (cudaErrorNotSupported). */
static inline cudaError_t cudaGraphAddNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                           size_t count, struct cudaGraphNodeParams* p) {
  if (!p) return polypy_rt_fail(cudaErrorInvalidValue);
  switch (p->type) {
    case cudaGraphNodeTypeKernel: {
      struct cudaKernelNodeParams k = {p->kernel.func, p->kernel.gridDim, p->kernel.blockDim,
                                       p->kernel.sharedMemBytes, p->kernel.kernelParams, p->kernel.extra};
      return cudaGraphAddKernelNode(out, g, deps, count, &k);
    }
    case cudaGraphNodeTypeMemcpy: return cudaGraphAddMemcpyNode(out, g, deps, count, &p->memcpy.copyParams);
    case cudaGraphNodeTypeMemset: {
      struct cudaMemsetParams m = {p->memset.dst, p->memset.pitch, p->memset.value, p->memset.elementSize,
                                   p->memset.width, p->memset.height};
      return cudaGraphAddMemsetNode(out, g, deps, count, &m);
    }
    case cudaGraphNodeTypeHost: {
      struct cudaHostNodeParams h = {p->host.fn, p->host.userData};
      return cudaGraphAddHostNode(out, g, deps, count, &h);
    }
    case cudaGraphNodeTypeGraph: return cudaGraphAddChildGraphNode(out, g, deps, count, p->graph.graph);
    case cudaGraphNodeTypeEmpty: return cudaGraphAddEmptyNode(out, g, deps, count);
    case cudaGraphNodeTypeMemAlloc: {
      cudaError_t e = polypy_rt_alloc_params_check(&p->alloc.poolProps, p->alloc.accessDescs, p->alloc.accessDescCount);
      if (e != cudaSuccess) return e;
      return polypy_rt_add_alloc(out, g, deps, count, p->alloc.bytesize, &p->alloc.dptr);
    }
    case cudaGraphNodeTypeMemFree: return polypy_rt_add_free(out, g, deps, count, p->free.dptr);
    case cudaGraphNodeTypeConditional: return polypy_rt_add_conditional(out, g, deps, count, &p->conditional);
    default: return polypy_rt_fail(cudaErrorNotSupported);
  }
}
/* CUDA 12.3's form (cudaGraphAddNode_v2, cudaGraphAddNode in CUDA 13) with data per edge: only
 * default edges (no programmatic ports) are implemented. */
static inline bool polypy_rt_default_edges(const struct cudaGraphEdgeData* edges, size_t count) {
  for (size_t i = 0; edges && i < count; ++i)
    if (edges[i].from_port || edges[i].to_port || edges[i].type) return false;
  return true;
}
static inline cudaError_t cudaGraphAddNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                           const struct cudaGraphEdgeData* edges, size_t count,
                                           struct cudaGraphNodeParams* p) {
  if (!polypy_rt_default_edges(edges, count)) return polypy_rt_fail(cudaErrorNotSupported);
  return cudaGraphAddNode(out, g, deps, count, p);
}
static inline cudaError_t cudaGraphAddNode_v2(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                              const struct cudaGraphEdgeData* edges, size_t count,
                                              struct cudaGraphNodeParams* p) {
  return cudaGraphAddNode(out, g, deps, edges, count, p);
}
