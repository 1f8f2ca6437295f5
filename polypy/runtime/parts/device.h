/* polypy runtime: device management, device properties and attributes, versions, peer access,
 * profiler control (part of cuda_runtime.h).
 *
 * One device: the CPU. Its properties are those of a recent GPU where programs size their work by
 * them (warp size, block limits), and the machine's where they describe it (memory, cores). The
 * launch model fixes the rest: every core is one multiprocessor and runs one block at a time, so a
 * multiprocessor holds one resident block of at most 1024 threads (the occupancy API says the same,
 * parts/execution.h). cudaDeviceGetAttribute reads the same cudaDeviceProp that
 * cudaGetDeviceProperties fills, so the two always agree. */
enum cudaComputeMode {
  cudaComputeModeDefault = 0,
  cudaComputeModeExclusive = 1,
  cudaComputeModeProhibited = 2,
  cudaComputeModeExclusiveProcess = 3
};
struct cudaUUID_st { char bytes[16]; };
typedef struct cudaUUID_st cudaUUID_t;
/* Every field of CUDA 12's cudaDeviceProp (the reserved tail excepted). */
struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  char luid[8];
  unsigned int luidDeviceNodeMask;
  size_t totalGlobalMem, sharedMemPerBlock;
  int regsPerBlock, warpSize;
  size_t memPitch;
  int maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], clockRate;
  size_t totalConstMem;
  int major, minor;
  size_t textureAlignment, texturePitchAlignment;
  int deviceOverlap, multiProcessorCount, kernelExecTimeoutEnabled, integrated, canMapHostMemory, computeMode;
  int maxTexture1D, maxTexture1DMipmap, maxTexture1DLinear, maxTexture2D[2], maxTexture2DMipmap[2];
  int maxTexture2DLinear[3], maxTexture2DGather[2], maxTexture3D[3], maxTexture3DAlt[3], maxTextureCubemap;
  int maxTexture1DLayered[2], maxTexture2DLayered[3], maxTextureCubemapLayered[2];
  int maxSurface1D, maxSurface2D[2], maxSurface3D[3], maxSurface1DLayered[2], maxSurface2DLayered[3];
  int maxSurfaceCubemap, maxSurfaceCubemapLayered[2];
  size_t surfaceAlignment;
  int concurrentKernels, ECCEnabled, pciBusID, pciDeviceID, pciDomainID, tccDriver, asyncEngineCount;
  int unifiedAddressing, memoryClockRate, memoryBusWidth, l2CacheSize, persistingL2CacheMaxSize;
  int maxThreadsPerMultiProcessor, streamPrioritiesSupported, globalL1CacheSupported, localL1CacheSupported;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor, managedMemory, isMultiGpuBoard, multiGpuBoardGroupID, hostNativeAtomicSupported;
  int singleToDoublePrecisionPerfRatio, pageableMemoryAccess, concurrentManagedAccess, computePreemptionSupported;
  int canUseHostPointerForRegisteredMem, cooperativeLaunch, cooperativeMultiDeviceLaunch;
  size_t sharedMemPerBlockOptin;
  int pageableMemoryAccessUsesHostPageTables, directManagedMemAccessFromHost, maxBlocksPerMultiProcessor;
  int accessPolicyMaxWindowSize;
  size_t reservedSharedMemPerBlock;
  int hostRegisterSupported, sparseCudaArraySupported, hostRegisterReadOnlySupported;
  int timelineSemaphoreInteropSupported, memoryPoolsSupported, gpuDirectRDMASupported;
  unsigned int gpuDirectRDMAFlushWritesOptions;
  int gpuDirectRDMAWritesOrdering;
  unsigned int memoryPoolSupportedHandleTypes;
  int deferredMappingCudaArraySupported, ipcEventSupported, clusterLaunch, unifiedFunctionPointers;
};
/* The cores this process may use: the multiprocessors. */
static inline int polypy_rt_cores(void) {
#ifdef _OPENMP
  return omp_get_num_procs() > 0 ? omp_get_num_procs() : 1;
#elif defined(POLYPY_RT_HAVE_SYSCONF)
  return sysconf(_SC_NPROCESSORS_ONLN) > 0 ? (int)sysconf(_SC_NPROCESSORS_ONLN) : 1;
#else
  return 1;
#endif
}
#define POLYPY_RT_TOTAL_MEM ((size_t)1 << 34)
static inline cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* p, int device) {
  if (!p) return polypy_rt_fail(cudaErrorInvalidValue);
  if (device != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  memset(p, 0, sizeof *p);
  strcpy(p->name, "polypy CPU");
  memcpy(p->uuid.bytes, "polypy-cpu-dev-0", 16);
  p->totalGlobalMem = POLYPY_RT_TOTAL_MEM;
  /* compute capability 8.0: 48 KiB per block, 163 KiB with cudaFuncSetAttribute (parts/kernels.h) */
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerBlockOptin = 163 * 1024;
  p->sharedMemPerMultiprocessor = 164 * 1024;
  p->regsPerBlock = p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->memPitch = (size_t)1 << 31;
  p->maxThreadsPerBlock = p->maxThreadsPerMultiProcessor = 1024;
  p->maxBlocksPerMultiProcessor = 1;
  p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
  p->clockRate = 1000000; /* kHz: clock() in kernels is not translated; a nominal 1 GHz */
  p->memoryClockRate = 1000000;
  p->memoryBusWidth = 64;
  p->totalConstMem = 64 * 1024;
  p->textureAlignment = 512;
  p->texturePitchAlignment = 32;
  p->surfaceAlignment = 512;
  /* Textures and surfaces (parts/texture.h): the sizes of a current GPU; no mipmaps, no gathers. */
  p->maxTexture1DLinear = 1 << 27;
  p->maxTexture1D = 131072; p->maxTexture2D[0] = 131072; p->maxTexture2D[1] = 65536;
  p->maxTexture2DLinear[0] = 131072; p->maxTexture2DLinear[1] = 65000; p->maxTexture2DLinear[2] = 2097120;
  p->maxTexture3D[0] = p->maxTexture3D[1] = p->maxTexture3D[2] = 16384;
  p->maxTexture3DAlt[0] = p->maxTexture3DAlt[1] = 8192; p->maxTexture3DAlt[2] = 32768;
  p->maxTextureCubemap = 32768; p->maxTexture1DLayered[0] = 32768; p->maxTexture1DLayered[1] = 2048;
  p->maxTexture2DLayered[0] = p->maxTexture2DLayered[1] = 32768; p->maxTexture2DLayered[2] = 2048;
  p->maxTextureCubemapLayered[0] = 32768; p->maxTextureCubemapLayered[1] = 2046;
  p->maxSurface1D = 32768; p->maxSurface2D[0] = 131072; p->maxSurface2D[1] = 65536;
  p->maxSurface3D[0] = p->maxSurface3D[1] = p->maxSurface3D[2] = 16384;
  p->maxSurface1DLayered[0] = 32768; p->maxSurface1DLayered[1] = 2048;
  p->maxSurface2DLayered[0] = p->maxSurface2DLayered[1] = 32768; p->maxSurface2DLayered[2] = 2048;
  p->maxSurfaceCubemap = 32768; p->maxSurfaceCubemapLayered[0] = 32768; p->maxSurfaceCubemapLayered[1] = 2046;
  p->deviceOverlap = 1;
  p->asyncEngineCount = 1;
  p->concurrentKernels = 1;
  p->canMapHostMemory = 1;
  p->unifiedAddressing = 1;
  p->managedMemory = 1;
  p->integrated = 1; /* the "device" shares the host's memory */
  p->pageableMemoryAccess = 1;
  p->pageableMemoryAccessUsesHostPageTables = 1;
  p->concurrentManagedAccess = 1;
  p->directManagedMemAccessFromHost = 1;
  p->canUseHostPointerForRegisteredMem = 1;
  p->hostNativeAtomicSupported = 1;
  p->hostRegisterSupported = 1;
  p->hostRegisterReadOnlySupported = 1;
  p->memoryPoolsSupported = 1;
  p->globalL1CacheSupported = p->localL1CacheSupported = 1;
  p->singleToDoublePrecisionPerfRatio = 2;
  p->computeMode = cudaComputeModeDefault;
  p->l2CacheSize = 4 << 20;
  p->multiProcessorCount = polypy_rt_cores();
  p->cooperativeLaunch = 1; /* one block per multiprocessor (cudaLaunchCooperativeKernel, parts/kernels.h) */
  p->major = 8; p->minor = 0;
  return cudaSuccess;
}

/* The attributes of cudaDeviceGetAttribute (CUDA's numbering), each read from the properties. */
#define POLYPY_DEVICE_ATTRIBUTES(X) \
  X(MaxThreadsPerBlock, 1, p.maxThreadsPerBlock) X(MaxBlockDimX, 2, p.maxThreadsDim[0]) \
  X(MaxBlockDimY, 3, p.maxThreadsDim[1]) X(MaxBlockDimZ, 4, p.maxThreadsDim[2]) \
  X(MaxGridDimX, 5, p.maxGridSize[0]) X(MaxGridDimY, 6, p.maxGridSize[1]) X(MaxGridDimZ, 7, p.maxGridSize[2]) \
  X(MaxSharedMemoryPerBlock, 8, p.sharedMemPerBlock) X(TotalConstantMemory, 9, p.totalConstMem) \
  X(WarpSize, 10, p.warpSize) X(MaxPitch, 11, p.memPitch) X(MaxRegistersPerBlock, 12, p.regsPerBlock) \
  X(ClockRate, 13, p.clockRate) X(TextureAlignment, 14, p.textureAlignment) X(GpuOverlap, 15, p.deviceOverlap) \
  X(MultiProcessorCount, 16, p.multiProcessorCount) X(KernelExecTimeout, 17, p.kernelExecTimeoutEnabled) \
  X(Integrated, 18, p.integrated) X(CanMapHostMemory, 19, p.canMapHostMemory) X(ComputeMode, 20, p.computeMode) \
  X(MaxTexture1DWidth, 21, p.maxTexture1D) X(MaxTexture2DWidth, 22, p.maxTexture2D[0]) \
  X(MaxTexture2DHeight, 23, p.maxTexture2D[1]) X(MaxTexture3DWidth, 24, p.maxTexture3D[0]) \
  X(MaxTexture3DHeight, 25, p.maxTexture3D[1]) X(MaxTexture3DDepth, 26, p.maxTexture3D[2]) \
  X(MaxTexture2DLayeredWidth, 27, p.maxTexture2DLayered[0]) X(MaxTexture2DLayeredHeight, 28, p.maxTexture2DLayered[1]) \
  X(MaxTexture2DLayeredLayers, 29, p.maxTexture2DLayered[2]) X(SurfaceAlignment, 30, p.surfaceAlignment) \
  X(ConcurrentKernels, 31, p.concurrentKernels) X(EccEnabled, 32, p.ECCEnabled) X(PciBusId, 33, p.pciBusID) \
  X(PciDeviceId, 34, p.pciDeviceID) X(TccDriver, 35, p.tccDriver) X(MemoryClockRate, 36, p.memoryClockRate) \
  X(GlobalMemoryBusWidth, 37, p.memoryBusWidth) X(L2CacheSize, 38, p.l2CacheSize) \
  X(MaxThreadsPerMultiProcessor, 39, p.maxThreadsPerMultiProcessor) X(AsyncEngineCount, 40, p.asyncEngineCount) \
  X(UnifiedAddressing, 41, p.unifiedAddressing) X(MaxTexture1DLayeredWidth, 42, p.maxTexture1DLayered[0]) \
  X(MaxTexture1DLayeredLayers, 43, p.maxTexture1DLayered[1]) X(MaxTexture2DGatherWidth, 45, p.maxTexture2DGather[0]) \
  X(MaxTexture2DGatherHeight, 46, p.maxTexture2DGather[1]) X(MaxTexture3DWidthAlt, 47, p.maxTexture3DAlt[0]) \
  X(MaxTexture3DHeightAlt, 48, p.maxTexture3DAlt[1]) X(MaxTexture3DDepthAlt, 49, p.maxTexture3DAlt[2]) \
  X(PciDomainId, 50, p.pciDomainID) X(TexturePitchAlignment, 51, p.texturePitchAlignment) \
  X(MaxTextureCubemapWidth, 52, p.maxTextureCubemap) X(MaxTextureCubemapLayeredWidth, 53, p.maxTextureCubemapLayered[0]) \
  X(MaxTextureCubemapLayeredLayers, 54, p.maxTextureCubemapLayered[1]) X(MaxSurface1DWidth, 55, p.maxSurface1D) \
  X(MaxSurface2DWidth, 56, p.maxSurface2D[0]) X(MaxSurface2DHeight, 57, p.maxSurface2D[1]) \
  X(MaxSurface3DWidth, 58, p.maxSurface3D[0]) X(MaxSurface3DHeight, 59, p.maxSurface3D[1]) \
  X(MaxSurface3DDepth, 60, p.maxSurface3D[2]) X(MaxSurface1DLayeredWidth, 61, p.maxSurface1DLayered[0]) \
  X(MaxSurface1DLayeredLayers, 62, p.maxSurface1DLayered[1]) X(MaxSurface2DLayeredWidth, 63, p.maxSurface2DLayered[0]) \
  X(MaxSurface2DLayeredHeight, 64, p.maxSurface2DLayered[1]) X(MaxSurface2DLayeredLayers, 65, p.maxSurface2DLayered[2]) \
  X(MaxSurfaceCubemapWidth, 66, p.maxSurfaceCubemap) X(MaxSurfaceCubemapLayeredWidth, 67, p.maxSurfaceCubemapLayered[0]) \
  X(MaxSurfaceCubemapLayeredLayers, 68, p.maxSurfaceCubemapLayered[1]) \
  X(MaxTexture1DLinearWidth, 69, p.maxTexture1DLinear) X(MaxTexture2DLinearWidth, 70, p.maxTexture2DLinear[0]) \
  X(MaxTexture2DLinearHeight, 71, p.maxTexture2DLinear[1]) X(MaxTexture2DLinearPitch, 72, p.maxTexture2DLinear[2]) \
  X(MaxTexture2DMipmappedWidth, 73, p.maxTexture2DMipmap[0]) X(MaxTexture2DMipmappedHeight, 74, p.maxTexture2DMipmap[1]) \
  X(ComputeCapabilityMajor, 75, p.major) X(ComputeCapabilityMinor, 76, p.minor) \
  X(MaxTexture1DMipmappedWidth, 77, p.maxTexture1DMipmap) X(StreamPrioritiesSupported, 78, p.streamPrioritiesSupported) \
  X(GlobalL1CacheSupported, 79, p.globalL1CacheSupported) X(LocalL1CacheSupported, 80, p.localL1CacheSupported) \
  X(MaxSharedMemoryPerMultiprocessor, 81, p.sharedMemPerMultiprocessor) \
  X(MaxRegistersPerMultiprocessor, 82, p.regsPerMultiprocessor) X(ManagedMemory, 83, p.managedMemory) \
  X(IsMultiGpuBoard, 84, p.isMultiGpuBoard) X(MultiGpuBoardGroupID, 85, p.multiGpuBoardGroupID) \
  X(HostNativeAtomicSupported, 86, p.hostNativeAtomicSupported) \
  X(SingleToDoublePrecisionPerfRatio, 87, p.singleToDoublePrecisionPerfRatio) \
  X(PageableMemoryAccess, 88, p.pageableMemoryAccess) X(ConcurrentManagedAccess, 89, p.concurrentManagedAccess) \
  X(ComputePreemptionSupported, 90, p.computePreemptionSupported) \
  X(CanUseHostPointerForRegisteredMem, 91, p.canUseHostPointerForRegisteredMem) \
  X(CooperativeLaunch, 95, p.cooperativeLaunch) X(CooperativeMultiDeviceLaunch, 96, p.cooperativeMultiDeviceLaunch) \
  X(MaxSharedMemoryPerBlockOptin, 97, p.sharedMemPerBlockOptin) X(CanFlushRemoteWrites, 98, 0) \
  X(HostRegisterSupported, 99, p.hostRegisterSupported) \
  X(PageableMemoryAccessUsesHostPageTables, 100, p.pageableMemoryAccessUsesHostPageTables) \
  X(DirectManagedMemAccessFromHost, 101, p.directManagedMemAccessFromHost) \
  X(MaxBlocksPerMultiprocessor, 106, p.maxBlocksPerMultiProcessor) \
  X(MaxPersistingL2CacheSize, 108, p.persistingL2CacheMaxSize) \
  X(MaxAccessPolicyWindowSize, 109, p.accessPolicyMaxWindowSize) \
  X(ReservedSharedMemoryPerBlock, 111, p.reservedSharedMemPerBlock) \
  X(SparseCudaArraySupported, 112, p.sparseCudaArraySupported) \
  X(HostRegisterReadOnlySupported, 113, p.hostRegisterReadOnlySupported) \
  X(TimelineSemaphoreInteropSupported, 114, p.timelineSemaphoreInteropSupported) \
  X(MemoryPoolsSupported, 115, p.memoryPoolsSupported) X(GPUDirectRDMASupported, 116, p.gpuDirectRDMASupported) \
  X(GPUDirectRDMAFlushWritesOptions, 117, p.gpuDirectRDMAFlushWritesOptions) \
  X(GPUDirectRDMAWritesOrdering, 118, p.gpuDirectRDMAWritesOrdering) \
  X(MemoryPoolSupportedHandleTypes, 119, p.memoryPoolSupportedHandleTypes) X(ClusterLaunch, 120, p.clusterLaunch) \
  X(DeferredMappingCudaArraySupported, 121, p.deferredMappingCudaArraySupported) \
  X(IpcEventSupport, 125, p.ipcEventSupported)
#define POLYPY_ATTRIBUTE_ENUM(name, value, field) cudaDevAttr##name = value,
enum cudaDeviceAttr { POLYPY_DEVICE_ATTRIBUTES(POLYPY_ATTRIBUTE_ENUM) cudaDevAttrMax };
#undef POLYPY_ATTRIBUTE_ENUM
static inline cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  if (!value) return polypy_rt_fail(cudaErrorInvalidValue);
  struct cudaDeviceProp p;
  cudaError_t e = cudaGetDeviceProperties(&p, device);
  if (e != cudaSuccess) return e;
#define POLYPY_ATTRIBUTE_CASE(name, number, field) case cudaDevAttr##name: *value = (int)(field); return cudaSuccess;
  switch (attr) { POLYPY_DEVICE_ATTRIBUTES(POLYPY_ATTRIBUTE_CASE) default: break; }
#undef POLYPY_ATTRIBUTE_CASE
  return polypy_rt_fail(cudaErrorInvalidValue);
}

static inline cudaError_t cudaGetDeviceCount(int* n) {
  if (!n) return polypy_rt_fail(cudaErrorInvalidValue);
  *n = 1;
  return cudaSuccess;
}
/* The one device is device 0; any other number is cudaErrorInvalidDevice, as on a machine with one GPU. */
static inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : polypy_rt_fail(cudaErrorInvalidDevice); }
static inline cudaError_t cudaGetDevice(int* d) {
  if (!d) return polypy_rt_fail(cudaErrorInvalidValue);
  *d = 0;
  return cudaSuccess;
}
static inline cudaError_t cudaInitDevice(int d, unsigned int device_flags, unsigned int flags) {
  (void)device_flags; (void)flags;
  return cudaSetDevice(d);
}
static inline cudaError_t cudaChooseDevice(int* d, const struct cudaDeviceProp* p) {
  if (!d || !p) return polypy_rt_fail(cudaErrorInvalidValue);
  *d = 0;
  return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetPCIBusId(char* id, int len, int device) {
  if (!id || len <= 0) return polypy_rt_fail(cudaErrorInvalidValue);
  if (device != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  snprintf(id, (size_t)len, "0000:00:00.0");
  return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* id) {
  if (!device || !id) return polypy_rt_fail(cudaErrorInvalidValue);
  if (strcmp(id, "0000:00:00.0") != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  *device = 0;
  return cudaSuccess;
}
#define cudaDeviceScheduleAuto 0x00
#define cudaDeviceScheduleSpin 0x01
#define cudaDeviceScheduleYield 0x02
#define cudaDeviceScheduleBlockingSync 0x04
#define cudaDeviceBlockingSync 0x04
#define cudaDeviceScheduleMask 0x07
#define cudaDeviceMapHost 0x08
#define cudaDeviceLmemResizeToMax 0x10
#define cudaDeviceMask 0x1f
/* The flags are kept (cudaGetDeviceFlags returns them) and change nothing: the host thread does
 * the work of every call itself, so there is nothing to spin or block on. */
inline unsigned int* polypy_rt_device_flags(void) { static unsigned int f = 0; return &f; }
static inline cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  if (flags & ~(unsigned int)cudaDeviceMask) return polypy_rt_fail(cudaErrorInvalidValue);
  *polypy_rt_device_flags() = flags;
  return cudaSuccess;
}
static inline cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  if (!flags) return polypy_rt_fail(cudaErrorInvalidValue);
  *flags = *polypy_rt_device_flags() | cudaDeviceMapHost;
  return cudaSuccess;
}
/* Waits for the work issued so far to every stream (the default stream's is complete when its call
 * returns); returns a kernel's sticky failure (parts/errors.h). */
static inline cudaError_t cudaDeviceSynchronize(void) {
  POLYPY_RT_HOOKED(polypy_rt_queues_device_wait, polypy_rt_device_wait());
  return *polypy_rt_sticky_error();
}
static inline cudaError_t cudaThreadSynchronize(void) { return cudaDeviceSynchronize(); }
static inline cudaError_t cudaDeviceReset(void) {
  polypy_rt_release_cached();
  *polypy_rt_last_error() = *polypy_rt_sticky_error() = cudaSuccess;
  return cudaSuccess;
}
static inline cudaError_t cudaThreadExit(void) { return cudaDeviceReset(); }
/* The "driver" is 12.8: it has the graph features of CUDA 12.3 to 12.8 programs test it for
 * (conditional nodes: IF and WHILE, IF/ELSE and SWITCH; parts/graph_conditional.h). */
static inline cudaError_t cudaDriverGetVersion(int* v) {
  if (!v) return polypy_rt_fail(cudaErrorInvalidValue);
  *v = 12080;
  return cudaSuccess;
}
static inline cudaError_t cudaRuntimeGetVersion(int* v) {
  if (!v) return polypy_rt_fail(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

/* Limits: the ones CUDA lets a program set are kept and read back. cudaLimitMallocHeapSize sizes
 * the device heap (parts/heap.h), which is made at the first launch of a kernel that uses it: from
 * then on setting it fails with cudaErrorInvalidValue, as in CUDA. The others constrain nothing
 * here (stacks are the host threads', printf has no buffer to fill). */
POLYPY_RT_STATE int* polypy_rt_heap_made(void) { static int made = 0; return &made; }
enum cudaLimit {
  cudaLimitStackSize = 0, cudaLimitPrintfFifoSize = 1, cudaLimitMallocHeapSize = 2, cudaLimitDevRuntimeSyncDepth = 3,
  cudaLimitDevRuntimePendingLaunchCount = 4, cudaLimitMaxL2FetchGranularity = 5, cudaLimitPersistingL2CacheSize = 6
};
inline size_t* polypy_rt_limits(void) {
  static size_t limits[7] = {1024, (size_t)1 << 20, (size_t)8 << 20, 2, 2048, 32, 0};
  return limits;
}
static inline cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value) {
  if ((int)limit < 0 || (int)limit > 6) return polypy_rt_fail(cudaErrorUnsupportedLimit);
  if (limit == cudaLimitPersistingL2CacheSize && value != 0) return polypy_rt_fail(cudaErrorInvalidValue);
  if (limit == cudaLimitMallocHeapSize && *polypy_rt_heap_made()) return polypy_rt_fail(cudaErrorInvalidValue);
  polypy_rt_limits()[limit] = value;
  return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetLimit(size_t* value, enum cudaLimit limit) {
  if (!value) return polypy_rt_fail(cudaErrorInvalidValue);
  if ((int)limit < 0 || (int)limit > 6) return polypy_rt_fail(cudaErrorUnsupportedLimit);
  *value = polypy_rt_limits()[limit];
  return cudaSuccess;
}

static inline cudaError_t cudaThreadSetLimit(enum cudaLimit limit, size_t value) { return cudaDeviceSetLimit(limit, value); }
static inline cudaError_t cudaThreadGetLimit(size_t* value, enum cudaLimit limit) { return cudaDeviceGetLimit(value, limit); }

/* Peer access: one device, so there is no peer. CUDA answers "no" for a device and itself. */
enum cudaDeviceP2PAttr {
  cudaDevP2PAttrPerformanceRank = 1, cudaDevP2PAttrAccessSupported = 2, cudaDevP2PAttrNativeAtomicSupported = 3,
  cudaDevP2PAttrCudaArrayAccessSupported = 4
};
static inline cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  if (!can) return polypy_rt_fail(cudaErrorInvalidValue);
  if (device != 0 || peer != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  *can = 0;
  return cudaSuccess;
}
static inline cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (flags != 0) return polypy_rt_fail(cudaErrorInvalidValue);
  return polypy_rt_fail(cudaErrorInvalidDevice);  /* the only device cannot be its own peer */
}
static inline cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  return polypy_rt_fail(peer == 0 ? cudaErrorPeerAccessNotEnabled : cudaErrorInvalidDevice);
}
static inline cudaError_t cudaDeviceGetP2PAttribute(int* value, enum cudaDeviceP2PAttr attr, int src, int dst) {
  (void)attr;
  if (!value) return polypy_rt_fail(cudaErrorInvalidValue);
  if (src != 0 || dst != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  return polypy_rt_fail(cudaErrorInvalidDevice);  /* src and dst must differ */
}

/* Profiler control (<cuda_profiler_api.h>): no profiler attaches to a translated program. */
static inline cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
static inline cudaError_t cudaProfilerStop(void) { return cudaSuccess; }
