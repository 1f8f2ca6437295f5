/* polypy runtime: executable graphs: instantiate, launch, update, parameters set on the executable
 * graph (part of cuda_runtime.h; the graphs are parts/graphs.h). */
/* ------------------------------------------------------------------ executable graphs */
static inline cudaError_t polypy_rt_instantiate(cudaGraphExec_t* out, cudaGraph_t g, unsigned long long flags) {
  if (!out || !g || (flags & ~(unsigned long long)15)) return polypy_rt_fail(cudaErrorInvalidValue);
  if (flags & cudaGraphInstantiateFlagDeviceLaunch) return polypy_rt_fail(cudaErrorNotSupported);  /* no device launch */
  /* Memory nodes only at the top (a child graph cannot hold them; conditional bodies hold
   * kernels, copies, fills, empty, child and conditional nodes); one executable graph at a time. */
  if (!polypy_rt_conditionals_valid(g)) return polypy_rt_fail(cudaErrorInvalidValue);
  if (!polypy_rt_graph_mem_instantiable(g)) return polypy_rt_fail(cudaErrorNotSupported);
  cudaGraphExec_t exec = new polypy_rt_graph_exec();
  exec->graph = polypy_rt_graph_copy(g);
  exec->originals = g->nodes;
  exec->flags = flags;
  if (!polypy_rt_graph_order(exec->graph, &exec->order)) {
    polypy_rt_graph_free(exec->graph);
    delete exec;
    return polypy_rt_fail(cudaErrorInvalidValue);  /* a cycle */
  }
  polypy_rt_graph_mem_execs(exec->graph, 1);
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
  polypy_rt_graph_mem_execs(exec->graph, -1);  /* its allocations' memory is no longer used by it */
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
    if (polypy_rt_graph_has_memory_nodes(exec->graph) || polypy_rt_graph_has(exec->graph, cudaGraphNodeTypeConditional))
      return polypy_rt_capture_unsupported(s);  /* a child graph cannot hold memory or conditional nodes */
    cudaError_t e = polypy_rt_capture(s, cudaGraphNodeTypeGraph, std::function<cudaError_t()>());
    if (e == cudaSuccess) polypy_rt_stream_of(s)->capture->tail.back()->child = polypy_rt_graph_copy(exec->graph);
    return e;
  }
  polypy_rt_stream_drain(s);  /* the graph runs on the calling thread, after the stream's work */
  cudaError_t relaunch = polypy_rt_graph_mem_relaunch(exec->graph, exec->flags & cudaGraphInstantiateFlagAutoFreeOnLaunch);
  if (relaunch != cudaSuccess) return relaunch;
  polypy_rt_conditions_reset(exec->graph);
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
    if (a->alloc != b->alloc || a->condition != b->condition || a->bodies.size() != b->bodies.size())
      return cudaGraphExecUpdateErrorNotSupported;  /* memory and conditional nodes keep their parameters */
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
    for (size_t k = 0; k < a->bodies.size(); ++k) {
      enum cudaGraphExecUpdateResult r = polypy_rt_update_check(a->bodies[k], b->bodies[k], error_node);
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
    for (size_t k = 0; k < a->bodies.size(); ++k) polypy_rt_update_take(a->bodies[k], b->bodies[k]);
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

