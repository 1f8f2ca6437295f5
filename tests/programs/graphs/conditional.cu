// Conditional nodes: IF taken and not taken, IF/ELSE, WHILE looping with the kernel setting the
// condition, SWITCH, the default value with cudaGraphCondAssignDefault, a body captured with
// cudaStreamBeginCaptureToGraph.
#include <cstdio>

__global__ void decide(const int* x, cudaGraphConditionalHandle h) {
  if (threadIdx.x == 0) cudaGraphSetConditional(h, x[0] > 5);
}
__global__ void pick(const int* x, cudaGraphConditionalHandle h) {
  if (threadIdx.x == 0) cudaGraphSetConditional(h, x[0]);
}
__global__ void add(int* log, int v) {
  if (threadIdx.x == 0) log[0] = log[0] * 10 + v;
}
// One step of a countdown: the condition stays set while the counter is not zero.
__global__ void count_down(int* counter, int* log, cudaGraphConditionalHandle h) {
  if (threadIdx.x == 0) {
    counter[0] -= 1;
    log[1] += 1;
    if (counter[0] == 0) cudaGraphSetConditional(h, 0);
  }
}

static void kernel_node(cudaGraph_t g, cudaGraphNode_t* out, const cudaGraphNode_t* dep, size_t ndep, void* f,
                        void** args) {
  cudaGraphNodeParams p = {cudaGraphNodeTypeKernel};
  p.kernel.func = f;
  p.kernel.gridDim = dim3(1);
  p.kernel.blockDim = dim3(32);
  p.kernel.kernelParams = args;
  cudaGraphAddNode(out, g, dep, NULL, ndep, &p);
}

int main() {
  int *x, *log;
  cudaMalloc(&x, sizeof(int));
  cudaMalloc(&log, 2 * sizeof(int));
  int one = 1, two = 2, three = 3;

  // IF / ELSE after a kernel that decides.
  cudaGraph_t g;
  cudaGraphCreate(&g, 0);
  cudaGraphConditionalHandle h;
  cudaGraphConditionalHandleCreate(&h, g);
  cudaGraphNode_t k, cond, body;
  void* dargs[] = {&x, &h};
  kernel_node(g, &k, NULL, 0, (void*)decide, dargs);
  cudaGraphNodeParams cp = {cudaGraphNodeTypeConditional};
  cp.conditional.handle = h;
  cp.conditional.type = cudaGraphCondTypeIf;
  cp.conditional.size = 2;
  cudaGraphAddNode(&cond, g, &k, NULL, 1, &cp);
  cudaGraph_t then_g = cp.conditional.phGraph_out[0], else_g = cp.conditional.phGraph_out[1];
  void* a1[] = {&log, &one};
  void* a2[] = {&log, &two};
  kernel_node(then_g, &body, NULL, 0, (void*)add, a1);
  kernel_node(else_g, &body, NULL, 0, (void*)add, a2);
  cudaGraphExec_t ge;
  printf("instantiate %s\n", cudaGetErrorName(cudaGraphInstantiate(&ge, g, 0)));
  int vals[] = {9, 3, 6};
  int h_log[2] = {0, 0};
  cudaMemcpy(log, h_log, sizeof h_log, cudaMemcpyHostToDevice);
  for (int v : vals) {
    cudaMemcpy(x, &v, sizeof v, cudaMemcpyHostToDevice);
    cudaGraphLaunch(ge, 0);
  }
  cudaMemcpy(h_log, log, sizeof h_log, cudaMemcpyDeviceToHost);
  printf("if_else %d\n", h_log[0]);

  // IF alone (size 1), not taken then taken.
  cudaGraph_t g1;
  cudaGraphCreate(&g1, 0);
  cudaGraphConditionalHandle h1;
  cudaGraphConditionalHandleCreate(&h1, g1);
  void* dargs1[] = {&x, &h1};
  kernel_node(g1, &k, NULL, 0, (void*)decide, dargs1);
  cp.conditional.handle = h1;
  cp.conditional.size = 1;
  cudaGraphAddNode(&cond, g1, &k, NULL, 1, &cp);
  void* a3[] = {&log, &three};
  kernel_node(cp.conditional.phGraph_out[0], &body, NULL, 0, (void*)add, a3);
  cudaGraphExec_t ge1;
  cudaGraphInstantiate(&ge1, g1, 0);
  h_log[0] = 0;
  cudaMemcpy(log, h_log, sizeof h_log, cudaMemcpyHostToDevice);
  for (int v : {0, 7, 2, 8}) {
    cudaMemcpy(x, &v, sizeof v, cudaMemcpyHostToDevice);
    cudaGraphLaunch(ge1, 0);
  }
  cudaMemcpy(h_log, log, sizeof h_log, cudaMemcpyDeviceToHost);
  printf("if %d\n", h_log[0]);

  // WHILE with default 1 (assigned at each launch); the body, captured into the body graph,
  // counts down and clears the condition at zero.
  cudaGraph_t gw;
  cudaGraphCreate(&gw, 0);
  cudaGraphConditionalHandle hw;
  cudaGraphConditionalHandleCreate(&hw, gw, 1, cudaGraphCondAssignDefault);
  cp.conditional.handle = hw;
  cp.conditional.type = cudaGraphCondTypeWhile;
  cp.conditional.size = 1;
  cudaGraphAddNode(&cond, gw, NULL, NULL, 0, &cp);
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaError_t began = cudaStreamBeginCaptureToGraph(s, cp.conditional.phGraph_out[0], NULL, NULL, 0,
                                                    cudaStreamCaptureModeGlobal);
  count_down<<<1, 32, 0, s>>>(x, log, hw);
  cudaError_t ended = cudaStreamEndCapture(s, NULL);
  printf("capture_to_graph %s %s\n", cudaGetErrorName(began), cudaGetErrorName(ended));
  cudaGraphExec_t gwe;
  cudaGraphInstantiate(&gwe, gw, 0);
  for (int v : {4, 7}) {
    cudaMemcpy(x, &v, sizeof v, cudaMemcpyHostToDevice);
    h_log[1] = 0;
    cudaMemcpy(log, h_log, sizeof h_log, cudaMemcpyHostToDevice);
    cudaGraphLaunch(gwe, s);
    int left = -1;
    cudaMemcpy(&left, x, sizeof left, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_log, log, sizeof h_log, cudaMemcpyDeviceToHost);
    printf("while %d trips left %d\n", h_log[1], left);
  }

  // SWITCH of 3 bodies: values 0..3 (3 runs none).
  cudaGraph_t gs;
  cudaGraphCreate(&gs, 0);
  cudaGraphConditionalHandle hs;
  cudaGraphConditionalHandleCreate(&hs, gs);
  void* pargs[] = {&x, &hs};
  kernel_node(gs, &k, NULL, 0, (void*)pick, pargs);
  cp.conditional.handle = hs;
  cp.conditional.type = cudaGraphCondTypeSwitch;
  cp.conditional.size = 3;
  cudaGraphAddNode(&cond, gs, &k, NULL, 1, &cp);
  void** bodies[] = {a1, a2, a3};
  for (int i = 0; i < 3; ++i) kernel_node(cp.conditional.phGraph_out[i], &body, NULL, 0, (void*)add, bodies[i]);
  cudaGraphExec_t gse;
  cudaGraphInstantiate(&gse, gs, 0);
  h_log[0] = 0;
  cudaMemcpy(log, h_log, sizeof h_log, cudaMemcpyHostToDevice);
  for (int v : {2, 0, 3, 1}) {
    cudaMemcpy(x, &v, sizeof v, cudaMemcpyHostToDevice);
    cudaGraphLaunch(gse, s);
  }
  cudaMemcpy(h_log, log, sizeof h_log, cudaMemcpyDeviceToHost);
  printf("switch %d\n", h_log[0]);

  // A WHILE node's size must be 1; a host node in a body refuses instantiation.
  cp.conditional.type = cudaGraphCondTypeWhile;
  cp.conditional.size = 2;
  printf("bad_size %s\n", cudaGetErrorName(cudaGraphAddNode(&cond, gs, NULL, NULL, 0, &cp)));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  printf("driver %d\n", driver >= 12080);
  return 0;
}
