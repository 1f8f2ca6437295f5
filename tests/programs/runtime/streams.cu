// Streams whose work runs while the host goes on (tests/test_streams.py): each check prints a line.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cuda_runtime.h>

__global__ void add(int* a, int n, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += v;
}
__global__ void twice_plus(int* out, const int* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2 * in[i] + 1;
}

// A gate the host opens: a host function that waits for it holds its stream. It waits 20 s at
// most, so that a runtime that runs it at once ends (and the check prints 0) instead of hanging.
static std::atomic<int> gate(0);
static int gate_seen = -1;
static void wait_for_gate(void*) {
  auto start = std::chrono::steady_clock::now();
  while (!gate.load() && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  gate_seen = gate.load();
}
static void nap(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

static int order[8], order_n = 0;
static int* seen_by_callback;
static int callback_value = -1;
static void CUDART_CB callback(cudaStream_t, cudaError_t status, void* tag) {
  order[order_n++] = (int)(size_t)tag;
  if (status == cudaSuccess) callback_value = seen_by_callback[0];
}
static void host_fn(void* tag) { order[order_n++] = (int)(size_t)tag; }

int main() {
  const int n = 4096;
  int *d, *e, h[n];
  cudaMalloc(&d, n * sizeof(int));
  cudaMalloc(&e, n * sizeof(int));
  cudaStream_t s, t, nb;
  cudaStreamCreate(&s);
  cudaStreamCreate(&t);
  cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
  cudaEvent_t done, start, stop;
  cudaEventCreate(&done);
  cudaEventCreate(&start);
  cudaEventCreate(&stop);

  // One stream, in order, while the host goes on: nothing runs before the gate opens.
  cudaMemsetAsync(d, 0, n * sizeof(int), s);
  cudaEventRecord(start, s);
  cudaLaunchHostFunc(s, wait_for_gate, 0);
  add<<<n / 256, 256, 0, s>>>(d, n, 5);
  add<<<n / 256, 256, 0, s>>>(d, n, 7);
  cudaEventRecord(stop, s);
  cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s);
  float ms = 0;
  cudaError_t query = cudaStreamQuery(s), event_query = cudaEventQuery(stop);
  cudaError_t elapsed = cudaEventElapsedTime(&ms, start, stop);
  cudaGetLastError();
  gate = 1;
  cudaError_t synced = cudaStreamSynchronize(s);
  printf("pending %s %s %s released %d\n", cudaGetErrorName(query), cudaGetErrorName(event_query),
         cudaGetErrorName(elapsed), gate_seen);
  printf("ordered %d %d %s %s\n", h[0], h[n - 1], cudaGetErrorName(synced), cudaGetErrorName(cudaStreamQuery(s)));
  gate = 0;

  // Two streams: t waits for the event s records after its kernel; both run kernels of many blocks.
  cudaLaunchHostFunc(s, wait_for_gate, 0);
  add<<<n / 256, 256, 0, s>>>(d, n, 1);  // 13
  cudaEventRecord(done, s);
  cudaStreamWaitEvent(t, done, 0);
  twice_plus<<<n / 128, 128, 0, t>>>(e, d, n);  // 27, only after s's kernel
  cudaError_t t_query = cudaStreamQuery(t);
  gate = 1;
  cudaStreamSynchronize(t);
  cudaMemcpy(h, e, n * sizeof(int), cudaMemcpyDeviceToHost);
  printf("joined %d %d %s\n", h[0], h[n - 1], cudaGetErrorName(t_query));
  gate = 0;

  // Callbacks and host functions in stream order, after the work before them.
  seen_by_callback = h;
  cudaLaunchHostFunc(s, host_fn, (void*)1);
  add<<<1, 256, 0, s>>>(d, 256, 100);  // d[0] = 113
  cudaMemcpyAsync(h, d, sizeof(int), cudaMemcpyDeviceToHost, s);
  cudaStreamAddCallback(s, callback, (void*)2, 0);
  cudaLaunchHostFunc(s, host_fn, (void*)3);
  cudaDeviceSynchronize();
  printf("callbacks %d %d %d %d value %d\n", order_n, order[0], order[1], order[2], callback_value);

  // The legacy default stream waits for a blocking stream's work; not for a non-blocking one's.
  cudaLaunchHostFunc(s, nap, 0);
  add<<<n / 256, 256, 0, s>>>(d, n, 1000);
  cudaMemcpy(h, d, sizeof(int), cudaMemcpyDeviceToHost);  // after s's kernel: 1113
  int after_blocking = h[0];
  cudaLaunchHostFunc(nb, wait_for_gate, 0);
  add<<<n / 256, 256, 0, nb>>>(d, n, 1);
  cudaMemcpy(h, d, sizeof(int), cudaMemcpyDeviceToHost);  // does not wait for nb: 1113
  int before_nonblocking = h[0];
  cudaError_t nb_query = cudaStreamQuery(nb);
  gate = 1;
  cudaStreamSynchronize(nb);
  cudaMemcpy(h, d, sizeof(int), cudaMemcpyDeviceToHost);
  printf("legacy %d %d %s %d\n", after_blocking, before_nonblocking, cudaGetErrorName(nb_query), h[0]);

  // Errors: a launch configuration is checked at the launch; a destroyed stream's work still runs.
  add<<<1, 2048, 0, s>>>(d, n, 1);
  cudaError_t launch = cudaGetLastError();
  gate = 0;
  cudaLaunchHostFunc(s, wait_for_gate, 0);
  add<<<n / 256, 256, 0, s>>>(d, n, 1);
  cudaError_t destroyed = cudaStreamDestroy(s);
  gate = 1;
  cudaError_t device = cudaDeviceSynchronize();
  cudaMemcpy(h, d, sizeof(int), cudaMemcpyDeviceToHost);
  printf("errors %s %s %s %d wait_bad %s\n", cudaGetErrorName(launch), cudaGetErrorName(destroyed),
         cudaGetErrorName(device), h[0], cudaGetErrorName(cudaStreamWaitEvent(t, done, 3)));
  cudaStreamDestroy(t);
  cudaStreamDestroy(nb);
  cudaEventDestroy(done);
  cudaFree(d);
  cudaFree(e);
  return 0;
}
