/* polypy runtime: execution control, occupancy, cache preferences; the launch, graph and IPC
 * entry points polypy refuses (part of cuda_runtime.h).
 *
 * The occupancy and cache calls that name a kernel are macros that drop it: their answers do not
 * depend on the kernel. cudaLaunchKernel and cudaFuncGetAttributes take a kernel's host stub
 * (parts/kernels.h). */

/* Cache and shared-memory preferences: nothing to configure on a CPU. */
enum cudaFuncCache {
  cudaFuncCachePreferNone = 0,
  cudaFuncCachePreferShared = 1,
  cudaFuncCachePreferL1 = 2,
  cudaFuncCachePreferEqual = 3
};
enum cudaSharedMemConfig {
  cudaSharedMemBankSizeDefault = 0,
  cudaSharedMemBankSizeFourByte = 1,
  cudaSharedMemBankSizeEightByte = 2
};
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
  cudaFuncAttributeClusterDimMustBeSet = 10,
  cudaFuncAttributeRequiredClusterWidth = 11,
  cudaFuncAttributeRequiredClusterHeight = 12,
  cudaFuncAttributeRequiredClusterDepth = 13,
  cudaFuncAttributeNonPortableClusterSizeAllowed = 14,
  cudaFuncAttributeClusterSchedulingPolicyPreference = 15
};
#define cudaSharedmemCarveoutDefault (-1)
#define cudaSharedmemCarveoutMaxShared 100
#define cudaSharedmemCarveoutMaxL1 0
#define cudaFuncSetCacheConfig(func, config) ((void)(config), cudaSuccess)
#define cudaFuncSetSharedMemConfig(func, config) ((void)(config), cudaSuccess)
/* cudaFuncSetAttribute takes the kernel's host stub (parts/kernels.h). */
static inline cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache c) { (void)c; return cudaSuccess; }
static inline cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache* c) {
  if (!c) return polypy_rt_fail(cudaErrorInvalidValue);
  *c = cudaFuncCachePreferNone;
  return cudaSuccess;
}
static inline cudaError_t cudaThreadSetCacheConfig(enum cudaFuncCache c) { (void)c; return cudaSuccess; }
static inline cudaError_t cudaThreadGetCacheConfig(enum cudaFuncCache* c) { return cudaDeviceGetCacheConfig(c); }
static inline cudaError_t cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig c) { (void)c; return cudaSuccess; }
static inline cudaError_t cudaDeviceGetSharedMemConfig(enum cudaSharedMemConfig* c) {
  if (!c) return polypy_rt_fail(cudaErrorInvalidValue);
  *c = cudaSharedMemBankSizeFourByte;
  return cudaSuccess;
}

/* ------------------------------------------------------------------ occupancy */
/* What the launch model does: each core (a multiprocessor, cudaDeviceProp.multiProcessorCount)
 * runs one block at a time, whatever its shared memory, so a multiprocessor holds one resident
 * block when the block size is valid (1 to 1024 threads) and none otherwise. The block size that
 * keeps the most threads resident is then the largest one allowed (a multiple of the warp size,
 * as CUDA's search steps). */
static inline cudaError_t polypy_rt_occupancy_blocks(int* blocks, int block_size, size_t shmem) {
  (void)shmem;
  if (!blocks) return polypy_rt_fail(cudaErrorInvalidValue);
  *blocks = block_size >= 1 && block_size <= 1024 ? 1 : 0;
  return cudaSuccess;
}
static inline int polypy_rt_best_block(int limit) {
  int best = limit > 0 && limit < 1024 ? limit : 1024;
  return best >= 32 ? best / 32 * 32 : best;
}
static inline cudaError_t polypy_rt_potential_block_size(int* min_grid, int* block_size, size_t shmem = 0, int limit = 0) {
  (void)shmem;
  if (!min_grid || !block_size) return polypy_rt_fail(cudaErrorInvalidValue);
  *block_size = polypy_rt_best_block(limit);
  *min_grid = polypy_rt_cores();
  return cudaSuccess;
}
template <class F>
static inline cudaError_t polypy_rt_potential_block_size_smem(int* min_grid, int* block_size, F smem_of, int limit = 0) {
  (void)smem_of;  /* shared memory does not limit residency (above) */
  return polypy_rt_potential_block_size(min_grid, block_size, 0, limit);
}
#define cudaOccupancyDefault 0x00
#define cudaOccupancyDisableCachingOverride 0x01
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, func, block_size, shmem) \
  polypy_rt_occupancy_blocks((blocks), (block_size), (shmem))
#define cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, func, block_size, shmem, flags) \
  ((void)(flags), polypy_rt_occupancy_blocks((blocks), (block_size), (shmem)))
#define cudaOccupancyMaxPotentialBlockSize(min_grid, block_size, func, ...) \
  polypy_rt_potential_block_size((min_grid), (block_size), ##__VA_ARGS__)
#define cudaOccupancyMaxPotentialBlockSizeWithFlags(min_grid, block_size, func, shmem, limit, flags) \
  ((void)(flags), polypy_rt_potential_block_size((min_grid), (block_size), (shmem), (limit)))
#define cudaOccupancyMaxPotentialBlockSizeVariableSMem(min_grid, block_size, func, ...) \
  polypy_rt_potential_block_size_smem((min_grid), (block_size), __VA_ARGS__)
#define cudaOccupancyMaxPotentialBlockSizeVariableSMemWithFlags(min_grid, block_size, func, smem_of, limit, flags) \
  ((void)(flags), polypy_rt_potential_block_size_smem((min_grid), (block_size), (smem_of), (limit)))
static inline cudaError_t polypy_rt_available_shmem(size_t* bytes, int blocks, int block_size) {
  if (!bytes) return polypy_rt_fail(cudaErrorInvalidValue);
  *bytes = blocks <= 1 && block_size >= 1 && block_size <= 1024 ? (size_t)48 * 1024 : 0;
  return cudaSuccess;
}
#define cudaOccupancyAvailableDynamicSMemPerBlock(bytes, func, blocks, block_size) \
  polypy_rt_available_shmem((bytes), (blocks), (block_size))

/* ------------------------------------------------------------------ refused */
/* Each is a compile-time error naming it, at the call: the frontend reports clang's
 * "'X' is unavailable: ..." with its location. The calls that name a kernel by a macro go to a
 * refused function of polypy's, which clang names in the error with the reason. */
#define POLYPY_RUNTIME_REFUSED(what) __attribute__((unavailable(what " is not supported by polypy")))
cudaError_t cudaLaunchKernelExC(...) POLYPY_RUNTIME_REFUSED("cudaLaunchKernelExC (launch with <<<...>>>)");
cudaError_t cudaLaunchCooperativeKernelMultiDevice(...) POLYPY_RUNTIME_REFUSED("cudaLaunchCooperativeKernelMultiDevice");
/* CUDA graphs (parts/graphs.h): what is not implemented. */
#define POLYPY_GRAPH_REFUSED(name, what) cudaError_t name(...) POLYPY_RUNTIME_REFUSED("CUDA graphs: " what " (" #name ")");
POLYPY_GRAPH_REFUSED(cudaGraphKernelNodeGetParams, "reading a kernel node's parameters back")
#undef POLYPY_GRAPH_REFUSED
/* Interprocess sharing: one process has the device. */
#define POLYPY_IPC_REFUSED(name) cudaError_t name(...) POLYPY_RUNTIME_REFUSED("interprocess memory (" #name ")");
POLYPY_IPC_REFUSED(cudaIpcGetMemHandle) POLYPY_IPC_REFUSED(cudaIpcOpenMemHandle)
POLYPY_IPC_REFUSED(cudaIpcCloseMemHandle) POLYPY_IPC_REFUSED(cudaIpcGetEventHandle)
POLYPY_IPC_REFUSED(cudaIpcOpenEventHandle) POLYPY_IPC_REFUSED(cudaMemPoolExportToShareableHandle)
POLYPY_IPC_REFUSED(cudaMemPoolImportFromShareableHandle)
#undef POLYPY_IPC_REFUSED
