/* polypy runtime: the driver API queries programs make before the runtime API (part of cuda_runtime.h). */
/* ------------------------------------------------------------------ the driver API's device queries */
/* What programs ask the driver before they use the runtime API (Rodinia mummergpu's
 * CUT_DEVICE_INIT_DRV and cuMemGetInfo): one device, as the runtime API above describes it. Modules,
 * contexts of their own and driver-API launches are not translated: each is refused where it is
 * called, by name. */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
inline int* polypy_rt_driver_ready(void) { static int ready = 0; return &ready; }
/* What every device query checks first: cuInit was called (or the runtime made its context, which
 * calls it: parts/memory.h), the device is the one device. */
static inline CUresult polypy_rt_driver_check(CUdevice device) {
  if (!*polypy_rt_driver_ready() && !*polypy_rt_context_made()) return CUDA_ERROR_NOT_INITIALIZED;
  return device == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
static inline CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *polypy_rt_driver_ready() = 1;
  return CUDA_SUCCESS;
}
static inline CUresult cuDriverGetVersion(int* v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = 12000;
  return CUDA_SUCCESS;
}
static inline CUresult cuDeviceGetCount(int* count) {
  CUresult e = polypy_rt_driver_check(0);
  if (e != CUDA_SUCCESS) return e;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}
static inline CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  CUresult e = polypy_rt_driver_check(ordinal);
  if (e != CUDA_SUCCESS) return e;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}
static inline CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice device) {
  CUresult e = polypy_rt_driver_check(device);
  if (e != CUDA_SUCCESS) return e;
  if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
  struct cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  *major = p.major;
  *minor = p.minor;
  return CUDA_SUCCESS;
}
static inline CUresult cuDeviceGetName(char* name, int len, CUdevice device) {
  CUresult e = polypy_rt_driver_check(device);
  if (e != CUDA_SUCCESS) return e;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  struct cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  strncpy(name, p.name, (size_t)len - 1);
  name[len - 1] = 0;
  return CUDA_SUCCESS;
}
static inline CUresult cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  CUresult e = polypy_rt_driver_check(device);
  if (e != CUDA_SUCCESS) return e;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  size_t free_bytes;
  cudaMemGetInfo(&free_bytes, bytes);
  return CUDA_SUCCESS;
}
static inline CUresult cuMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  CUresult e = polypy_rt_driver_check(0);
  if (e != CUDA_SUCCESS) return e;
  if (!free_bytes || !total_bytes) return CUDA_ERROR_INVALID_VALUE;
  cudaMemGetInfo(free_bytes, total_bytes);
  return CUDA_SUCCESS;
}
static inline CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
#define POLYPY_DRIVER_REFUSED(what) __attribute__((unavailable(what " is not supported by polypy (CUDA driver API)")))
CUresult cuCtxCreate(...) POLYPY_DRIVER_REFUSED("cuCtxCreate");
CUresult cuModuleLoad(...) POLYPY_DRIVER_REFUSED("cuModuleLoad");
CUresult cuModuleLoadData(...) POLYPY_DRIVER_REFUSED("cuModuleLoadData");
CUresult cuModuleGetFunction(...) POLYPY_DRIVER_REFUSED("cuModuleGetFunction");
CUresult cuLaunchKernel(...) POLYPY_DRIVER_REFUSED("cuLaunchKernel");
CUresult cuMemAlloc(...) POLYPY_DRIVER_REFUSED("cuMemAlloc");
CUresult cuMemcpyHtoD(...) POLYPY_DRIVER_REFUSED("cuMemcpyHtoD");
CUresult cuMemcpyDtoH(...) POLYPY_DRIVER_REFUSED("cuMemcpyDtoH");

