// Stream capture across two streams (fork and join through events), replayed many times.
#include <cstdio>
__global__ void add(float* x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}
__global__ void scale(float* x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= v;
}
struct Log { int calls; float seen[8]; const float* watch; };
static void CUDART_CB observe(void* p) {
  Log* log = (Log*)p;
  log->seen[log->calls % 8] = log->watch[0];  // the host node runs after the work it follows
  log->calls++;
}
int main() {
  const int n = 64;
  float *d, *h;
  cudaMalloc(&d, n * sizeof(float));
  cudaMallocHost(&h, n * sizeof(float));
  cudaMemset(d, 0, n * sizeof(float));
  cudaStream_t s, t;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamCreate(&t);
  cudaEvent_t fork, join;
  cudaEventCreate(&fork);
  cudaEventCreate(&join);
  Log log = {0, {0}, h};
  cudaGraph_t g;
  enum cudaStreamCaptureStatus st;
  cudaStreamIsCapturing(s, &st);
  printf("before %d\n", (int)st);
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  cudaStreamIsCapturing(s, &st);
  unsigned long long id = 0;
  cudaStreamGetCaptureInfo(s, &st, &id);
  printf("capturing %d id %d\n", (int)st, id != 0);
  add<<<2, 32, 0, s>>>(d, 1.0f, n);           // x + 1
  cudaEventRecord(fork, s);
  cudaStreamWaitEvent(t, fork, 0);            // t joins the capture after add
  cudaStreamIsCapturing(t, &st);
  printf("forked %d\n", (int)st);
  scale<<<1, 32, 0, t>>>(d, 3.0f, 32);        // first half * 3, in t
  cudaEventRecord(join, t);
  cudaStreamWaitEvent(s, join, 0);            // s waits for t
  cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s);
  cudaLaunchHostFunc(s, observe, &log);
  cudaStreamEndCapture(s, &g);
  cudaStreamIsCapturing(t, &st);
  printf("ended %d ran %d\n", (int)st, log.calls);
  size_t nodes = 0, roots = 0;
  cudaGraphGetNodes(g, NULL, &nodes);
  cudaGraphGetRootNodes(g, NULL, &roots);
  printf("nodes %d roots %d\n", (int)nodes, (int)roots);
  cudaGraphExec_t exec;
  cudaGraphInstantiate(&exec, g, 0);
  for (int r = 0; r < 100; ++r) cudaGraphLaunch(exec, s);
  cudaStreamSynchronize(s);
  float first = 0.0f, second = 0.0f;
  for (int k = 0; k < 100; ++k) { first = (first + 1.0f) * 3.0f; second = second + 1.0f; }
  printf("calls %d h0 %d h40 %d last_seen %d\n", log.calls, h[0] == first, h[40] == second, log.seen[(log.calls - 1) % 8] == first);
  // More captured work: a fill, a 2-D copy, and the executable graph above launched into the
  // capture (a child graph node: it runs the 4 nodes once more).
  float *f, hf[32];
  cudaMalloc(&f, 32 * sizeof(float));
  cudaGraph_t g2;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  cudaMemsetAsync(f, 0, 32 * sizeof(float), s);
  add<<<1, 32, 0, s>>>(f, 2.0f, 32);                                  // f = 2
  add<<<1, 32, 0, s>>>(f, 1.0f, 4);                                   // f[0..3] = 3
  cudaMemcpy2DAsync(f + 16, 2 * sizeof(float), f, 1 * sizeof(float), sizeof(float), 8, cudaMemcpyDeviceToDevice,
                    s);                                               // f[16 + 2r] = f[r], r < 8
  cudaGraphLaunch(exec, s);
  cudaMemcpyAsync(hf, f, sizeof hf, cudaMemcpyDeviceToHost, s);
  cudaStreamEndCapture(s, &g2);
  cudaGraphExec_t exec2;
  cudaGraphInstantiateWithFlags(&exec2, g2, 0);
  cudaGraphLaunch(exec2, s);
  cudaGraphLaunch(exec2, s);  // the fill starts it over
  printf("child_calls %d f", log.calls);
  for (int i = 14; i < 32; ++i) printf(" %g", hf[i]);
  printf("\n");
  // Unjoined work: t forks but never joins back.
  cudaGraph_t bad;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  cudaEventRecord(fork, s);
  cudaStreamWaitEvent(t, fork, 0);
  add<<<1, 32, 0, t>>>(d, 1.0f, 32);
  cudaError_t e = cudaStreamEndCapture(s, &bad);
  printf("unjoined %s %d\n", cudaGetErrorName(e), bad == NULL);
  cudaGetLastError();
  // Waiting for a capturing stream fails and invalidates the capture.
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  add<<<1, 32, 0, s>>>(d, 1.0f, 32);
  e = cudaStreamSynchronize(s);
  cudaStreamIsCapturing(s, &st);
  printf("sync_in_capture %s %d", cudaGetErrorName(e), (int)st);
  e = cudaStreamEndCapture(s, &bad);
  printf(" %s\n", cudaGetErrorName(e));
  cudaGetLastError();
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  enum cudaStreamCaptureMode back = mode;
  cudaThreadExchangeStreamCaptureMode(&back);
  printf("modes %d %d\n", (int)mode, (int)back);
  e = cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal);
  printf("legacy %s\n", cudaGetErrorName(e));
  cudaGetLastError();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaFree(d);
  cudaFreeHost(h);
  return 0;
}
