/* polypy runtime: graph nodes made by hand, their parameters, dependencies and listings (part of
 * cuda_runtime.h; the graphs themselves are parts/graphs.h). */
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
/* The child node holds a copy of the child graph, made now (CUDA clones it too); CUDA refuses a
 * child graph with memory or conditional nodes. */
static inline cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                                     size_t count, cudaGraph_t child) {
  if (!child || child == g || polypy_rt_graph_has_memory_nodes(child) ||
      polypy_rt_graph_has(child, cudaGraphNodeTypeConditional))
    return polypy_rt_fail(cudaErrorInvalidValue);
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

