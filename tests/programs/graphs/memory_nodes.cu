// Graph memory nodes: an allocation node, a kernel and a free node; an allocation the graph
// does not free, freed by cudaFree, by cudaFreeAsync and by another graph's free node; a
// relaunch while it is live; cudaMallocAsync/cudaFreeAsync captured; the graph memory
// attributes (used and reserved, current and high-water) after launches, frees and trims.
#include <cstdio>

__global__ void fill(float* a, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = v * i;
}
__global__ void scale(const float* a, float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = 2.0f * a[i];
}

static unsigned long long attr(cudaGraphMemAttributeType t) {
  unsigned long long v = 0;
  cudaDeviceGetGraphMemAttribute(0, t, &v);
  return v;
}
static void footprint(const char* when) {
  printf("%s used %llu high %llu reserved %llu high %llu\n", when, attr(cudaGraphMemAttrUsedMemCurrent) / 4096,
         attr(cudaGraphMemAttrUsedMemHigh) / 4096, attr(cudaGraphMemAttrReservedMemCurrent) / 4096,
         attr(cudaGraphMemAttrReservedMemHigh) / 4096);
}
static void alloc_params(cudaMemAllocNodeParams* p, size_t bytes) {
  memset(p, 0, sizeof *p);
  p->bytesize = bytes;
  p->poolProps.allocType = cudaMemAllocationTypePinned;
  p->poolProps.location.type = cudaMemLocationTypeDevice;
  p->poolProps.location.id = 0;
}

int main() {
  const int n = 4096;  // 16 KiB: 4 pages
  const size_t bytes = n * sizeof(float);
  float* host = (float*)malloc(bytes);
  footprint("start");

  // alloc a -> fill a -> alloc b -> scale a into b -> copy b out -> free a, free b.
  cudaGraph_t g;
  cudaGraphCreate(&g, 0);
  cudaMemAllocNodeParams p;
  alloc_params(&p, bytes);
  cudaGraphNode_t alloc_a, alloc_b, k1, k2, copy, free_a, free_b;
  cudaGraphAddMemAllocNode(&alloc_a, g, NULL, 0, &p);
  float* a = (float*)p.dptr;
  cudaKernelNodeParams kp = {0};
  kp.gridDim = dim3(n / 256);
  kp.blockDim = dim3(256);
  float v = 0.5f;
  int count = n;
  void* fill_args[] = {&a, &count, &v};
  kp.func = (void*)fill;
  kp.kernelParams = fill_args;
  cudaGraphAddKernelNode(&k1, g, &alloc_a, 1, &kp);
  cudaGraphAddMemAllocNode(&alloc_b, g, &k1, 1, &p);
  float* b = (float*)p.dptr;
  void* scale_args[] = {&a, &b, &count};
  kp.func = (void*)scale;
  kp.kernelParams = scale_args;
  cudaGraphAddKernelNode(&k2, g, &alloc_b, 1, &kp);
  cudaGraphAddMemcpyNode1D(&copy, g, &k2, 1, host, b, bytes, cudaMemcpyDeviceToHost);
  cudaGraphAddMemFreeNode(&free_a, g, &k2, 1, a);
  cudaGraphNode_t both[] = {copy, free_a};
  cudaGraphAddMemFreeNode(&free_b, g, both, 2, b);
  printf("distinct %d\n", a != b);
  cudaGraphExec_t ge;
  printf("instantiate %s", cudaGetErrorName(cudaGraphInstantiate(&ge, g, 0)));
  cudaGraphExec_t ge2;
  printf(" second %s\n", cudaGetErrorName(cudaGraphInstantiate(&ge2, g, 0)));
  footprint("instantiated");
  cudaStream_t s;
  cudaStreamCreate(&s);
  printf("launch %s", cudaGetErrorName(cudaGraphLaunch(ge, s)));
  cudaStreamSynchronize(s);
  printf(" b[3] %g b[4095] %g\n", host[3], host[4095]);
  footprint("launched");
  printf("relaunch %s\n", cudaGetErrorName(cudaGraphLaunch(ge, s)));
  footprint("relaunched");
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  footprint("destroyed");
  cudaDeviceGraphMemTrim(0);
  footprint("trimmed");

  // Reuse of an address inside a graph: alloc c, free c, then alloc d after the free.
  cudaGraph_t gr;
  cudaGraphCreate(&gr, 0);
  cudaGraphNode_t ac, fc, ad, fd;
  cudaGraphAddMemAllocNode(&ac, gr, NULL, 0, &p);
  void* c = p.dptr;
  cudaGraphAddMemFreeNode(&fc, gr, &ac, 1, c);
  cudaGraphAddMemAllocNode(&ad, gr, &fc, 1, &p);
  void* d = p.dptr;
  cudaGraphAddMemFreeNode(&fd, gr, &ad, 1, d);
  printf("reused %d free_twice %s\n", c == d, cudaGetErrorName(cudaGraphAddMemFreeNode(&fd, gr, &ac, 1, c)));
  cudaGraphExec_t gre;
  cudaGraphInstantiate(&gre, gr, 0);
  cudaGraphLaunch(gre, s);
  footprint("reuse");
  cudaGraphExecDestroy(gre);
  cudaGraphDestroy(gr);
  cudaDeviceGraphMemTrim(0);

  // An allocation the graph keeps: usable after the launch, freed by cudaFree, cudaFreeAsync and
  // another graph's free node; a relaunch while it is live fails.
  cudaGraph_t gk;
  cudaGraphCreate(&gk, 0);
  cudaGraphNode_t ak, kk;
  cudaGraphAddMemAllocNode(&ak, gk, NULL, 0, &p);
  float* kept = (float*)p.dptr;
  void* keep_args[] = {&kept, &count, &v};
  kp.func = (void*)fill;
  kp.kernelParams = keep_args;
  cudaGraphAddKernelNode(&kk, gk, &ak, 1, &kp);
  cudaGraphExec_t gke;
  cudaGraphInstantiate(&gke, gk, 0);
  cudaGraphLaunch(gke, s);
  cudaMemcpy(host, kept, bytes, cudaMemcpyDeviceToHost);
  printf("kept[10] %g live_relaunch %s\n", host[10], cudaGetErrorName(cudaGraphLaunch(gke, s)));
  footprint("kept");
  printf("cudaFree %s", cudaGetErrorName(cudaFree(kept)));
  printf(" again %s\n", cudaGetErrorName(cudaFree(kept)));
  footprint("freed");
  printf("relaunch %s", cudaGetErrorName(cudaGraphLaunch(gke, s)));
  printf(" cudaFreeAsync %s\n", cudaGetErrorName(cudaFreeAsync(kept, s)));
  cudaGraph_t gf;
  cudaGraphCreate(&gf, 0);
  cudaGraphNode_t fk;
  cudaGraphAddMemFreeNode(&fk, gf, NULL, 0, kept);
  cudaGraphExec_t gfe;
  cudaGraphInstantiate(&gfe, gf, 0);
  cudaGraphLaunch(gke, s);
  printf("free_graph %s", cudaGetErrorName(cudaGraphLaunch(gfe, s)));
  printf(" twice %s\n", cudaGetErrorName(cudaGraphLaunch(gfe, s)));
  cudaGetLastError();
  cudaGraphExec_t gauto;
  cudaGraphExecDestroy(gke);
  cudaGraphInstantiateWithFlags(&gauto, gk, cudaGraphInstantiateFlagAutoFreeOnLaunch);
  cudaGraphLaunch(gauto, s);
  printf("auto_free %s\n", cudaGetErrorName(cudaGraphLaunch(gauto, s)));
  cudaFree(kept);
  cudaGraphExecDestroy(gauto);
  cudaGraphExecDestroy(gfe);
  cudaDeviceGraphMemTrim(0);
  footprint("trimmed");
  unsigned long long zero = 0;
  cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero);
  cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &zero);
  footprint("reset");

  // Captured: cudaMallocAsync, a kernel, cudaFreeAsync; the free comes before the second
  // allocation, which reuses the address.
  cudaGraph_t gc;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  float *x, *y;
  cudaMallocAsync(&x, bytes, s);
  fill<<<n / 256, 256, 0, s>>>(x, n, 3.0f);
  cudaMallocAsync(&y, bytes, s);
  scale<<<n / 256, 256, 0, s>>>(x, y, n);
  cudaFreeAsync(x, s);
  float* z;
  cudaMallocAsync(&z, bytes, s);
  scale<<<n / 256, 256, 0, s>>>(y, z, n);
  cudaMemcpyAsync(host, z, bytes, cudaMemcpyDeviceToHost, s);
  cudaFreeAsync(y, s);
  cudaFreeAsync(z, s);
  printf("capture_end %s", cudaGetErrorName(cudaStreamEndCapture(s, &gc)));
  size_t nodes = 0;
  cudaGraphGetNodes(gc, NULL, &nodes);
  printf(" nodes %zu reused %d\n", nodes, z == x);
  cudaGraphExec_t gce;
  cudaGraphInstantiate(&gce, gc, 0);
  for (int i = 0; i < 3; ++i) cudaGraphLaunch(gce, s);
  cudaStreamSynchronize(s);
  printf("captured z[5] %g\n", host[5]);
  footprint("captured");
  float* plain;
  cudaMalloc(&plain, 64);
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  printf("plain_free %s", cudaGetErrorName(cudaFreeAsync(plain, s)));
  printf(" end %s\n", cudaGetErrorName(cudaStreamEndCapture(s, &gc)));
  return 0;
}
