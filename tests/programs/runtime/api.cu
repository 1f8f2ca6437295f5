// polypy's runtime API against CUDA's documented behaviour (issue 41): each line names what it checks;
// tests/test_runtime_api.py compares the output with what CUDA gives on a machine with one device.
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_profiler_api.h>

__global__ void add_one(int* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += 1;
}

static int g_order[8];
static int g_calls = 0;
static int* g_host = 0;
static void CUDART_CB after_kernel(void* data) { g_order[g_calls++] = *(int*)data + g_host[0]; }
static void CUDART_CB stream_callback(cudaStream_t s, cudaError_t status, void* data) {
  (void)s;
  g_order[g_calls++] = 100 * (int)status + *(int*)data;
}

int main() {
  cudaDeviceProp p;
  printf("props %d\n", (int)cudaGetDeviceProperties(&p, 0));
  printf("props_bad_device %s\n", cudaGetErrorName(cudaGetDeviceProperties(&p, 1)));
  cudaGetLastError();
  int v = -1, agree = 1;
  cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, 0); agree &= v == p.maxThreadsPerBlock;
  cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0); agree &= v == p.multiProcessorCount;
  cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0); agree &= v == p.major;
  cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMinor, 0); agree &= v == p.minor;
  cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, 0); agree &= v == p.clockRate;
  cudaDeviceGetAttribute(&v, cudaDevAttrComputeMode, 0); agree &= v == p.computeMode;
  cudaDeviceGetAttribute(&v, cudaDevAttrIntegrated, 0); agree &= v == p.integrated;
  cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlock, 0); agree &= v == (int)p.sharedMemPerBlock;
  cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerMultiProcessor, 0); agree &= v == p.maxThreadsPerMultiProcessor;
  cudaDeviceGetAttribute(&v, cudaDevAttrMaxBlocksPerMultiprocessor, 0); agree &= v == p.maxBlocksPerMultiProcessor;
  cudaDeviceGetAttribute(&v, cudaDevAttrMemoryPoolsSupported, 0); agree &= v == p.memoryPoolsSupported;
  cudaDeviceGetAttribute(&v, cudaDevAttrMaxGridDimY, 0); agree &= v == p.maxGridSize[1];
  printf("attributes_agree %d numbering %d %d %d\n", agree, (int)cudaDevAttrComputeCapabilityMajor,
         (int)cudaDevAttrMaxSharedMemoryPerMultiprocessor, (int)cudaDevAttrMemoryPoolsSupported);
  printf("attribute_bad %s\n", cudaGetErrorName(cudaDeviceGetAttribute(&v, (cudaDeviceAttr)44, 0)));
  printf("resident %d blocks x %d threads\n", p.maxBlocksPerMultiProcessor, p.maxThreadsPerMultiProcessor);

  // Errors: recorded, peeked, returned once.
  printf("set_device_1 %s\n", cudaGetErrorName(cudaSetDevice(1)));
  printf("peek %s\n", cudaGetErrorName(cudaPeekAtLastError()));
  printf("last %s\n", cudaGetErrorName(cudaGetLastError()));
  printf("cleared %s\n", cudaGetErrorName(cudaGetLastError()));

  // An invalid launch configuration: the kernel does not run, the error is the launch's.
  const int n = 64;
  int* d = 0;
  cudaMalloc(&d, n * sizeof(int));
  cudaMemset(d, 0, n * sizeof(int));
  add_one<<<1, 2048>>>(d, n);
  printf("launch_2048 %s sync %s\n", cudaGetErrorName(cudaGetLastError()), cudaGetErrorName(cudaDeviceSynchronize()));
  add_one<<<dim3(1, 70000), 32>>>(d, n);
  printf("launch_grid_y %s\n", cudaGetErrorName(cudaPeekAtLastError()));
  cudaGetLastError();
  int h[64];
  g_host = h;

  // Stream order: the kernel, the copy, then the host function sees the copied result.
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  unsigned int flags = 0;
  cudaStreamGetFlags(s, &flags);
  int ten = 10, seven = 7;
  add_one<<<2, 32, 0, s>>>(d, n);
  cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s);
  cudaLaunchHostFunc(s, after_kernel, &ten);
  cudaStreamAddCallback(s, stream_callback, &seven, 0);
  cudaStreamSynchronize(s);
  printf("stream_flags %u callbacks %d order %d %d\n", flags, g_calls, g_order[0], g_order[1]);
  int least = -1, greatest = -1;
  cudaDeviceGetStreamPriorityRange(&least, &greatest);
  printf("priorities %d %d destroy %d destroy_null %s\n", least, greatest, (int)cudaStreamDestroy(s),
         cudaGetErrorName(cudaStreamDestroy(0)));
  cudaGetLastError();

  // Events: timing only between recorded timing events.
  cudaEvent_t a, b, quiet;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventCreateWithFlags(&quiet, cudaEventDisableTiming);
  float ms = -1;
  printf("elapsed_unrecorded %s\n", cudaGetErrorName(cudaEventElapsedTime(&ms, a, b)));
  cudaEventRecord(a);
  cudaEventRecord(b);
  cudaEventRecord(quiet);
  cudaError_t timed = cudaEventElapsedTime(&ms, a, b);
  printf("elapsed %s %d no_timing %s\n", cudaGetErrorName(timed), ms >= 0, cudaGetErrorName(cudaEventElapsedTime(&ms, a, quiet)));
  cudaGetLastError();

  // Occupancy: one resident block of up to 1024 threads per multiprocessor.
  int blocks = -1, min_grid = -1, block = -1;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, add_one, 256, 0);
  printf("occupancy_256 %d", blocks);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, add_one, 2048, 0);
  printf(" occupancy_2048 %d", blocks);
  cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, add_one);
  printf(" potential %d grid_is_sms %d", block, min_grid == p.multiProcessorCount);
  cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, add_one, 0, 100);
  printf(" limited %d\n", block);

  // Stream-ordered allocation from the default pool.
  cudaMemPool_t pool;
  cudaDeviceGetDefaultMemPool(&pool, 0);
  unsigned long long threshold = 1 << 20, got = 0, used = 0;
  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &got);
  float* f = 0;
  cudaMallocAsync(&f, 4000, 0);
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
  printf("pool threshold %llu used %llu", got, used);
  cudaFreeAsync(f, 0);
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
  printf(" after_free %llu", used);
  cudaMallocAsync(&f, 96, 0);
  cudaFree(f);  // CUDA allows cudaFree of a pool's block
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
  unsigned long long high = 0;
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high);
  printf(" after_cudaFree %llu high %llu\n", used, high);

  // Pitched 3-D memory: a host box copied in and out through cudaMemcpy3D.
  const int W = 5, H = 3, D = 2;
  float box[D][H][W], back[D][H][W];
  for (int z = 0; z < D; ++z)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) box[z][y][x] = 100 * z + 10 * y + x, back[z][y][x] = -1;
  cudaExtent extent = make_cudaExtent(W * sizeof(float), H, D);
  cudaPitchedPtr dev;
  cudaMalloc3D(&dev, extent);
  cudaMemcpy3DParms in = {0};
  in.srcPtr = make_cudaPitchedPtr(box, W * sizeof(float), W, H);
  in.dstPtr = dev;
  in.extent = extent;
  in.kind = cudaMemcpyHostToDevice;
  cudaMemcpy3D(&in);
  cudaMemcpy3DParms out = {0};
  out.srcPtr = dev;
  out.dstPtr = make_cudaPitchedPtr(back, W * sizeof(float), W, H);
  out.extent = extent;
  out.kind = cudaMemcpyDeviceToHost;
  cudaMemcpy3D(&out);
  int same = 1;
  for (int z = 0; z < D; ++z)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) same &= back[z][y][x] == box[z][y][x];
  printf("pitch %d rows_padded %d copy3d %d row1 %g\n", (int)dev.pitch, dev.pitch >= W * sizeof(float), same,
         ((float*)((char*)dev.ptr + dev.pitch))[2]);

  // One device: no peer, peer copies within device 0, pointer kinds.
  int can = -1;
  cudaDeviceCanAccessPeer(&can, 0, 0);
  printf("peer %d enable %s", can, cudaGetErrorName(cudaDeviceEnablePeerAccess(0, 0)));
  cudaGetLastError();
  int* e = 0;
  cudaMalloc(&e, n * sizeof(int));
  cudaMemcpyPeer(e, 0, d, 0, n * sizeof(int));
  cudaMemcpy(h, e, n * sizeof(int), cudaMemcpyDeviceToHost);
  printf(" peer_copy %d %d\n", h[0], h[63]);
  cudaPointerAttributes attr;
  cudaPointerGetAttributes(&attr, e + 3);
  int kind_device = attr.type == cudaMemoryTypeDevice;
  cudaPointerGetAttributes(&attr, h);
  printf("pointer device %d host %d\n", kind_device, attr.type == cudaMemoryTypeUnregistered);

  // Limits, versions, profiler.
  size_t limit = 0;
  cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1 << 24);
  cudaDeviceGetLimit(&limit, cudaLimitMallocHeapSize);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  printf("limit %zu versions %d %d profiler %d %d\n", limit, driver >= runtime, runtime >= 11000,
         (int)cudaProfilerStart(), (int)cudaProfilerStop());
  printf("unified %d %d %s\n", (int)cudaMemAdvise(e, 64, cudaMemAdviseSetReadMostly, 0),
         (int)cudaMemPrefetchAsync(e, 64, cudaCpuDeviceId), cudaGetErrorName(cudaMemPrefetchAsync(e, 64, 3)));
  // Smaller queries: PCI id, device flags, thread limits, pool access, stream device and id.
  char bus[32];
  cudaDeviceGetPCIBusId(bus, sizeof bus, 0);
  int by_bus = -1;
  cudaDeviceGetByPCIBusId(&by_bus, bus);
  unsigned int dflags = 0, hflags = 0;
  cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
  cudaGetDeviceFlags(&dflags);
  cudaHostGetFlags(&hflags, e);
  size_t stack = 0;
  cudaThreadGetLimit(&stack, cudaLimitStackSize);
  cudaMemLocation here = {cudaMemLocationTypeDevice, 0};
  cudaMemAccessFlags access = cudaMemAccessFlagsProtNone;
  cudaMemPoolGetAccess(&access, pool, &here);
  cudaStream_t t;
  cudaStreamCreate(&t);
  int sdev = -1;
  unsigned long long id0 = 1, id1 = 0;
  cudaStreamGetDevice(t, &sdev);
  cudaStreamGetId(0, &id0);
  cudaStreamGetId(t, &id1);
  cudaStreamDestroy(t);
  printf("bus %s %d flags %u %u stack %zu access %d stream %d %llu %d\n", bus, by_bus, dflags, hflags, stack,
         (int)access, sdev, id0, id1 != 0);
  cudaFree(e);
  cudaFree(d);
  cudaFree(dev.ptr);
  return 0;
}
