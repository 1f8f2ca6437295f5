/* polypy runtime: the rest of the CUDA Runtime API, refused by name (part of cuda_runtime.h).
 *
 * Each function here has no exact meaning polypy implements: a call is a compile-time error at
 * the call, "'NAME' is unavailable: WHAT is not supported by polypy" (the frontend reports it with
 * its location, docs/runtime_api.md lists why). */
#define POLYPY_REFUSED(name, what) cudaError_t name(...) POLYPY_RUNTIME_REFUSED(what " (" #name ")");

/* CUDA graphs (the rest is parts/graphs.h). */
POLYPY_REFUSED(cudaGraphAddEventRecordNode, "CUDA graphs: event nodes")
POLYPY_REFUSED(cudaGraphAddEventWaitNode, "CUDA graphs: event nodes")
POLYPY_REFUSED(cudaGraphDebugDotPrint, "CUDA graphs: DOT output")

/* Mipmapped arrays, asynchronous array copies, array memory queries (CUDA arrays, texture and surface
 * objects: parts/texture.h). */
POLYPY_REFUSED(cudaArrayGetMemoryRequirements, "CUDA arrays") POLYPY_REFUSED(cudaMemcpyArrayToArray, "CUDA arrays")
POLYPY_REFUSED(cudaBindTexture2D, "2-D textures on pitched memory through references (use a texture object)")
POLYPY_REFUSED(cudaGetSurfaceObjectResourceDesc, "surface objects")
POLYPY_REFUSED(cudaArrayGetPlane, "CUDA arrays") POLYPY_REFUSED(cudaArrayGetSparseProperties, "CUDA arrays")
POLYPY_REFUSED(cudaMallocMipmappedArray, "mipmapped arrays") POLYPY_REFUSED(cudaFreeMipmappedArray, "mipmapped arrays")
POLYPY_REFUSED(cudaGetMipmappedArrayLevel, "mipmapped arrays") POLYPY_REFUSED(cudaMemcpy2DArrayToArray, "CUDA arrays")
POLYPY_REFUSED(cudaMemcpy2DToArrayAsync, "CUDA arrays") POLYPY_REFUSED(cudaMemcpy2DFromArrayAsync, "CUDA arrays")
POLYPY_REFUSED(cudaMemcpyToArrayAsync, "CUDA arrays") POLYPY_REFUSED(cudaMemcpyFromArrayAsync, "CUDA arrays")
POLYPY_REFUSED(cudaMipmappedArrayGetMemoryRequirements, "mipmapped arrays")
POLYPY_REFUSED(cudaMipmappedArrayGetSparseProperties, "mipmapped arrays")
POLYPY_REFUSED(cudaGetTextureObjectTextureDesc, "texture objects")
POLYPY_REFUSED(cudaGetTextureObjectResourceViewDesc, "texture objects")

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
