/* polypy runtime: the rest of the CUDA Runtime API, refused by name (part of cuda_runtime.h).
 *
 * Each function here has no exact meaning polypy implements: a call is a compile-time error at
 * the call, "'NAME' is unavailable: WHAT is not supported by polypy" (the frontend reports it with
 * its location, docs/runtime_api.md lists why). The parameter types programs declare before such
 * calls (graph node parameters, conditional handles) are declared, so that the first error a
 * program meets is the refusal, not an unknown type. */
#define POLYPY_REFUSED(name, what) cudaError_t name(...) POLYPY_RUNTIME_REFUSED(what " (" #name ")");

/* CUDA graphs (the rest is parts/graphs.h). */
typedef unsigned long long cudaGraphConditionalHandle;
enum cudaGraphMemAttributeType {
  cudaGraphMemAttrUsedMemCurrent = 0, cudaGraphMemAttrUsedMemHigh = 1, cudaGraphMemAttrReservedMemCurrent = 2,
  cudaGraphMemAttrReservedMemHigh = 3
};
struct cudaMemAllocNodeParams {
  struct cudaMemPoolProps poolProps;
  const struct cudaMemAccessDesc* accessDescs;
  size_t accessDescCount, bytesize;
  void* dptr;
};
POLYPY_REFUSED(cudaGraphAddEventRecordNode, "CUDA graphs: event nodes")
POLYPY_REFUSED(cudaGraphAddEventWaitNode, "CUDA graphs: event nodes")
POLYPY_REFUSED(cudaGraphSetConditional, "CUDA graphs: conditional nodes")
POLYPY_REFUSED(cudaGraphDebugDotPrint, "CUDA graphs: DOT output")
POLYPY_REFUSED(cudaStreamUpdateCaptureDependencies, "CUDA graphs: capture dependencies set by hand")
POLYPY_REFUSED(cudaDeviceSetGraphMemAttribute, "CUDA graphs: memory nodes")

/* CUDA arrays, mipmapped arrays, texture and surface objects (1-D texture references on linear
 * memory are translated: parts/texture.h). */
typedef unsigned long long cudaSurfaceObject_t;
struct cudaMipmappedArray;
typedef struct cudaMipmappedArray* cudaMipmappedArray_t;
#define cudaArrayDefault 0x00
#define cudaArrayLayered 0x01
#define cudaArraySurfaceLoadStore 0x02
#define cudaArrayCubemap 0x04
#define cudaArrayTextureGather 0x08
enum cudaSurfaceBoundaryMode { cudaBoundaryModeZero = 0, cudaBoundaryModeClamp = 1, cudaBoundaryModeTrap = 2 };
enum cudaResourceType { cudaResourceTypeArray = 0, cudaResourceTypeMipmappedArray = 1, cudaResourceTypeLinear = 2,
                        cudaResourceTypePitch2D = 3 };
struct cudaResourceDesc {
  enum cudaResourceType resType;
  union {
    struct { cudaArray_t array; } array;
    struct { cudaMipmappedArray_t mipmap; } mipmap;
    struct { void* devPtr; struct cudaChannelFormatDesc desc; size_t sizeInBytes; } linear;
    struct { void* devPtr; struct cudaChannelFormatDesc desc; size_t width, height, pitchInBytes; } pitch2D;
  } res;
};
struct cudaTextureDesc {
  enum cudaTextureAddressMode addressMode[3];
  enum cudaTextureFilterMode filterMode;
  enum cudaTextureReadMode readMode;
  int sRGB;
  float borderColor[4];
  int normalizedCoords;
  unsigned int maxAnisotropy;
  enum cudaTextureFilterMode mipmapFilterMode;
  float mipmapLevelBias, minMipmapLevelClamp, maxMipmapLevelClamp;
  int disableTrilinearOptimization, seamlessCubemap;
};
POLYPY_REFUSED(cudaArrayGetInfo, "CUDA arrays") POLYPY_REFUSED(cudaArrayGetMemoryRequirements, "CUDA arrays")
POLYPY_REFUSED(cudaArrayGetPlane, "CUDA arrays") POLYPY_REFUSED(cudaArrayGetSparseProperties, "CUDA arrays")
POLYPY_REFUSED(cudaMallocMipmappedArray, "CUDA arrays") POLYPY_REFUSED(cudaFreeMipmappedArray, "CUDA arrays")
POLYPY_REFUSED(cudaGetMipmappedArrayLevel, "CUDA arrays") POLYPY_REFUSED(cudaMemcpy2DArrayToArray, "CUDA arrays")
POLYPY_REFUSED(cudaMemcpy2DToArrayAsync, "CUDA arrays") POLYPY_REFUSED(cudaMemcpy2DFromArrayAsync, "CUDA arrays")
POLYPY_REFUSED(cudaMemcpyToArrayAsync, "CUDA arrays") POLYPY_REFUSED(cudaMemcpyFromArrayAsync, "CUDA arrays")
POLYPY_REFUSED(cudaMipmappedArrayGetMemoryRequirements, "CUDA arrays")
POLYPY_REFUSED(cudaMipmappedArrayGetSparseProperties, "CUDA arrays")
POLYPY_REFUSED(cudaGetChannelDesc, "CUDA arrays")
POLYPY_REFUSED(cudaGetTextureObjectResourceDesc, "texture objects")
POLYPY_REFUSED(cudaGetTextureObjectTextureDesc, "texture objects")
POLYPY_REFUSED(cudaGetTextureObjectResourceViewDesc, "texture objects")
POLYPY_REFUSED(cudaCreateSurfaceObject, "surface objects") POLYPY_REFUSED(cudaDestroySurfaceObject, "surface objects")
POLYPY_REFUSED(cudaGetSurfaceObjectResourceDesc, "surface objects")

/* Several-GPU 3-D copies, memory range queries, IPC of pool pointers. */
POLYPY_REFUSED(cudaMemcpy3DPeer, "3-D peer copies") POLYPY_REFUSED(cudaMemcpy3DPeerAsync, "3-D peer copies")
POLYPY_REFUSED(cudaMemcpyBatchAsync, "batched copies") POLYPY_REFUSED(cudaMemcpy3DBatchAsync, "batched copies")
POLYPY_REFUSED(cudaMemRangeGetAttribute, "managed memory range attributes")
POLYPY_REFUSED(cudaMemRangeGetAttributes, "managed memory range attributes")
POLYPY_REFUSED(cudaMemPoolExportPointer, "interprocess memory") POLYPY_REFUSED(cudaMemPoolImportPointer, "interprocess memory")

/* External resources (Vulkan, Direct3D, NvSci): another API's memory and semaphores. */
POLYPY_REFUSED(cudaImportExternalMemory, "external memory") POLYPY_REFUSED(cudaDestroyExternalMemory, "external memory")
POLYPY_REFUSED(cudaExternalMemoryGetMappedBuffer, "external memory")
POLYPY_REFUSED(cudaExternalMemoryGetMappedMipmappedArray, "external memory")
POLYPY_REFUSED(cudaImportExternalSemaphore, "external semaphores")
POLYPY_REFUSED(cudaDestroyExternalSemaphore, "external semaphores")
POLYPY_REFUSED(cudaSignalExternalSemaphoresAsync, "external semaphores")
POLYPY_REFUSED(cudaWaitExternalSemaphoresAsync, "external semaphores")
POLYPY_REFUSED(cudaDeviceGetNvSciSyncAttributes, "NvSci interoperability")

/* Device management beyond one CPU device; kernels as objects; driver entry points; libraries. */
POLYPY_REFUSED(cudaSetValidDevices, "device lists") POLYPY_REFUSED(cudaDeviceFlushGPUDirectRDMAWrites, "GPUDirect RDMA")
POLYPY_REFUSED(cudaDeviceGetTexture1DLinearMaxWidth, "texture limits of element formats")
POLYPY_REFUSED(cudaDeviceRegisterAsyncNotification, "device notifications")
POLYPY_REFUSED(cudaDeviceUnregisterAsyncNotification, "device notifications")
POLYPY_REFUSED(cudaFuncGetName, "kernels as objects") POLYPY_REFUSED(cudaFuncGetParamInfo, "kernels as objects")
POLYPY_REFUSED(cudaGetFuncBySymbol, "kernels as objects") POLYPY_REFUSED(cudaGetKernel, "kernels as objects")
POLYPY_REFUSED(cudaGetParameterBuffer, "dynamic parallelism") POLYPY_REFUSED(cudaGetParameterBufferV2, "dynamic parallelism")
POLYPY_REFUSED(cudaSetDoubleForDevice, "double-precision argument conversion")
POLYPY_REFUSED(cudaSetDoubleForHost, "double-precision argument conversion")
POLYPY_REFUSED(cudaOccupancyMaxActiveClusters, "thread-block clusters")
POLYPY_REFUSED(cudaOccupancyMaxPotentialClusterSize, "thread-block clusters")
POLYPY_REFUSED(cudaGetDriverEntryPoint, "driver entry points")
POLYPY_REFUSED(cudaGetDriverEntryPointByVersion, "driver entry points")
POLYPY_REFUSED(cudaLibraryLoadData, "library management") POLYPY_REFUSED(cudaLibraryLoadFromFile, "library management")
POLYPY_REFUSED(cudaLibraryGetKernel, "library management") POLYPY_REFUSED(cudaLibraryUnload, "library management")
#undef POLYPY_REFUSED
