// Graphs made by hand: memset, memcpy (1-D and 3-D), host, empty and child-graph nodes, edges
// added later, instantiate, relaunch, clone, update.
#include <cstdio>
__global__ void twice(int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 2 * x[i] + 1;
}
struct Trace { char order[64]; int len; const int* watch; };
struct Step { Trace* trace; char name; };
static void CUDART_CB step(void* p) {
  Step* s = (Step*)p;
  s->trace->order[s->trace->len++] = s->name;
  s->trace->order[s->trace->len] = 0;
}
static void CUDART_CB peek(void* p) {
  Step* s = (Step*)p;
  s->trace->order[s->trace->len++] = (char)('0' + s->trace->watch[5] % 10);
  s->trace->order[s->trace->len] = 0;
}
int main() {
  const int n = 32;
  int *d, *e, h[n];
  cudaMalloc(&d, n * sizeof(int));
  cudaMalloc(&e, n * sizeof(int));
  Trace trace = {{0}, 0, h};
  Step a = {&trace, 'a'}, b = {&trace, 'b'}, c = {&trace, 'c'}, z = {&trace, 'z'}, look = {&trace, '?'};
  cudaStream_t s;
  cudaStreamCreate(&s);

  // A kernel enters a graph by capture; the captured graph becomes a child node.
  cudaGraph_t kernel_graph;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  twice<<<1, 32, 0, s>>>(d, n);
  cudaStreamEndCapture(s, &kernel_graph);

  cudaGraph_t g;
  cudaGraphCreate(&g, 0);
  cudaGraphNode_t fill, host_a, host_b, host_c, child, copy, join, host_z, copy_e;
  struct cudaMemsetParams mp = {0};
  mp.dst = d; mp.value = 3; mp.elementSize = 4; mp.width = n; mp.height = 1;
  cudaGraphAddMemsetNode(&fill, g, NULL, 0, &mp);
  struct cudaHostNodeParams hp = {step, &a};
  cudaGraphAddHostNode(&host_a, g, &fill, 1, &hp);
  hp.userData = &b;
  cudaGraphAddHostNode(&host_b, g, &fill, 1, &hp);
  cudaGraphAddChildGraphNode(&child, g, &host_a, 1, kernel_graph);
  cudaGraphDestroy(kernel_graph);  // the child node holds its own copy
  cudaGraphAddMemcpyNode1D(&copy, g, &child, 1, h, d, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaGraphNode_t both[2] = {copy, host_b};
  cudaGraphAddEmptyNode(&join, g, both, 2);
  hp.fn = peek; hp.userData = &look;
  cudaGraphAddHostNode(&host_z, g, &join, 1, &hp);
  hp.fn = step; hp.userData = &c;
  cudaGraphAddHostNode(&host_c, g, NULL, 0, &hp);
  cudaGraphAddDependencies(g, &host_z, &host_c, 1);  // c, made last without dependencies, now runs last
  struct cudaMemcpy3DParms p3 = {0};
  p3.srcPtr = make_cudaPitchedPtr(d, n * sizeof(int), n, 1);
  p3.dstPtr = make_cudaPitchedPtr(e, n * sizeof(int), n, 1);
  p3.extent = make_cudaExtent(n * sizeof(int), 1, 1);
  p3.kind = cudaMemcpyDeviceToDevice;
  cudaGraphAddMemcpyNode(&copy_e, g, &child, 1, &p3);
  (void)z;
  size_t count = 0, roots = 0;
  cudaGraphGetNodes(g, NULL, &count);
  cudaGraphGetRootNodes(g, NULL, &roots);
  enum cudaGraphNodeType type;
  cudaGraphNodeGetType(child, &type);
  printf("nodes %d roots %d child_type %d\n", (int)count, (int)roots, (int)type);

  cudaGraphExec_t exec;
  cudaGraphInstantiate(&exec, g, NULL, NULL, 0);  // CUDA 11's signature
  cudaGraphLaunch(exec, s);
  cudaStreamSynchronize(s);
  int he[n];
  cudaMemcpy(he, e, sizeof he, cudaMemcpyDeviceToHost);
  printf("order %s h %d %d e %d\n", trace.order, h[0], h[31], he[7]);
  trace.len = 0;
  for (int r = 0; r < 5; ++r) cudaGraphLaunch(exec, s);  // the memset resets d each time
  printf("relaunched %s h %d\n", trace.order, h[5]);

  // An executable graph is a snapshot: the graph changed afterwards leaves it as it was.
  mp.value = 10;
  cudaGraphMemsetNodeSetParams(fill, &mp);
  trace.len = 0;
  cudaGraphLaunch(exec, s);
  printf("snapshot %s h %d\n", trace.order, h[5]);
  // Update with the same shape: the new fill value.
  struct cudaGraphExecUpdateResultInfo info;
  cudaError_t err = cudaGraphExecUpdate(exec, g, &info);
  trace.len = 0;
  cudaGraphLaunch(exec, s);
  printf("update %s %d %s h %d\n", cudaGetErrorName(err), (int)info.result, trace.order, h[5]);
  // The executable graph's own copy of a node, set directly.
  mp.value = 4;
  cudaGraphExecMemsetNodeSetParams(exec, fill, &mp);
  trace.len = 0;
  cudaGraphLaunch(exec, s);
  printf("exec_set %s h %d\n", trace.order, h[5]);

  // A clone runs as the original; a changed topology cannot update.
  cudaGraph_t g2;
  cudaGraphClone(&g2, g);
  cudaGraphNode_t extra;
  cudaGraphAddEmptyNode(&extra, g2, NULL, 0);
  cudaGraphNode_t err_node;
  enum cudaGraphExecUpdateResult result;
  err = cudaGraphExecUpdate(exec, g2, &err_node, &result);  // CUDA 11's signature
  printf("topology %s %d\n", cudaGetErrorName(err), (int)result);
  cudaGetLastError();
  cudaGraphExec_t exec2;
  cudaGraphInstantiateWithFlags(&exec2, g2, cudaGraphInstantiateFlagAutoFreeOnLaunch);
  trace.len = 0;
  cudaGraphLaunch(exec2, s);
  printf("clone %s h %d\n", trace.order, h[5]);

  // A cycle cannot be instantiated.
  cudaGraph_t cyc;
  cudaGraphCreate(&cyc, 0);
  cudaGraphNode_t x, y;
  cudaGraphAddEmptyNode(&x, cyc, NULL, 0);
  cudaGraphAddEmptyNode(&y, cyc, &x, 1);
  cudaGraphAddDependencies(cyc, &y, &x, 1);
  cudaGraphExec_t never;
  err = cudaGraphInstantiate(&never, cyc, 0);
  printf("cycle %s\n", cudaGetErrorName(err));

  cudaGraphExecDestroy(exec);
  cudaGraphExecDestroy(exec2);
  cudaGraphDestroy(g);
  cudaGraphDestroy(g2);
  cudaGraphDestroy(cyc);
  return 0;
}
