/* polypy runtime: error codes, the last error, launch configuration checks (part of cuda_runtime.h). */
/* ------------------------------------------------------------------ errors */
/* The error codes of the CUDA runtime (CUDA's numbering), with their names and messages: host
 * code prints them and switches over them. polypy itself reports only a few of them. */
#define POLYPY_CUDA_ERRORS(X) \
  X(cudaSuccess, 0, "no error") \
  X(cudaErrorInvalidValue, 1, "invalid argument") \
  X(cudaErrorMemoryAllocation, 2, "out of memory") \
  X(cudaErrorInitializationError, 3, "initialization error") \
  X(cudaErrorCudartUnloading, 4, "driver shutting down") \
  X(cudaErrorProfilerDisabled, 5, "profiler disabled while using external profiling tool") \
  X(cudaErrorProfilerNotInitialized, 6, "profiler not initialized") \
  X(cudaErrorProfilerAlreadyStarted, 7, "profiler already started") \
  X(cudaErrorProfilerAlreadyStopped, 8, "profiler already stopped") \
  X(cudaErrorInvalidConfiguration, 9, "invalid configuration argument") \
  X(cudaErrorInvalidPitchValue, 12, "invalid pitch argument") \
  X(cudaErrorInvalidSymbol, 13, "invalid device symbol") \
  X(cudaErrorInvalidHostPointer, 16, "invalid host pointer") \
  X(cudaErrorInvalidDevicePointer, 17, "invalid device pointer") \
  X(cudaErrorInvalidTexture, 18, "invalid texture reference") \
  X(cudaErrorInvalidTextureBinding, 19, "texture is not bound to a pointer") \
  X(cudaErrorInvalidChannelDescriptor, 20, "invalid channel descriptor") \
  X(cudaErrorInvalidMemcpyDirection, 21, "invalid copy direction for memcpy") \
  X(cudaErrorAddressOfConstant, 22, "invalid address of constant") \
  X(cudaErrorTextureFetchFailed, 23, "fetch from texture failed") \
  X(cudaErrorTextureNotBound, 24, "cannot fetch from a texture that is not bound") \
  X(cudaErrorSynchronizationError, 25, "incorrect use of __syncthreads()") \
  X(cudaErrorInvalidFilterSetting, 26, "linear filtering not supported for non-float type") \
  X(cudaErrorInvalidNormSetting, 27, "read as normalized float not supported for 32-bit non float type") \
  X(cudaErrorMixedDeviceExecution, 28, "device emulation mode and device execution mode cannot be mixed") \
  X(cudaErrorNotYetImplemented, 31, "function not yet implemented") \
  X(cudaErrorMemoryValueTooLarge, 32, "memory size or pointer value too large to fit in 32 bit") \
  X(cudaErrorInsufficientDriver, 35, "CUDA driver version is insufficient for CUDA runtime version") \
  X(cudaErrorInvalidSurface, 37, "invalid surface reference") \
  X(cudaErrorDuplicateVariableName, 43, "duplicate global variable looked up by string name") \
  X(cudaErrorDuplicateTextureName, 44, "duplicate texture looked up by string name") \
  X(cudaErrorDuplicateSurfaceName, 45, "duplicate surface looked up by string name") \
  X(cudaErrorDevicesUnavailable, 46, "all CUDA-capable devices are busy or unavailable") \
  X(cudaErrorIncompatibleDriverContext, 49, "incompatible driver context") \
  X(cudaErrorMissingConfiguration, 52, "__global__ function call is not configured") \
  X(cudaErrorPriorLaunchFailure, 53, "unspecified launch failure in prior launch") \
  X(cudaErrorInvalidDeviceFunction, 98, "invalid device function") \
  X(cudaErrorNoDevice, 100, "no CUDA-capable device is detected") \
  X(cudaErrorInvalidDevice, 101, "invalid device ordinal") \
  X(cudaErrorStartupFailure, 127, "device startup failure") \
  X(cudaErrorInvalidKernelImage, 200, "device kernel image is invalid") \
  X(cudaErrorMapBufferObjectFailed, 205, "mapping of buffer object failed") \
  X(cudaErrorUnmapBufferObjectFailed, 206, "unmapping of buffer object failed") \
  X(cudaErrorNoKernelImageForDevice, 209, "no kernel image is available for execution on the device") \
  X(cudaErrorECCUncorrectable, 214, "uncorrectable ECC error encountered") \
  X(cudaErrorUnsupportedLimit, 215, "limit is not supported on this architecture") \
  X(cudaErrorDeviceAlreadyInUse, 216, "exclusive-thread device already in use by a different thread") \
  X(cudaErrorSharedObjectSymbolNotFound, 302, "shared object symbol not found") \
  X(cudaErrorSharedObjectInitFailed, 303, "shared object initialization failed") \
  X(cudaErrorInvalidResourceHandle, 400, "invalid resource handle") \
  X(cudaErrorNotReady, 600, "device not ready") \
  X(cudaErrorIllegalAddress, 700, "an illegal memory access was encountered") \
  X(cudaErrorLaunchOutOfResources, 701, "too many resources requested for launch") \
  X(cudaErrorLaunchTimeout, 702, "the launch timed out and was terminated") \
  X(cudaErrorIllegalState, 401, "the operation cannot be performed in the present state") \
  X(cudaErrorPeerAccessAlreadyEnabled, 704, "peer access is already enabled") \
  X(cudaErrorPeerAccessNotEnabled, 705, "peer access has not been enabled") \
  X(cudaErrorSetOnActiveProcess, 708, "cannot set while device is active in this process") \
  X(cudaErrorAssert, 710, "device-side assert triggered") \
  X(cudaErrorTooManyPeers, 711, "peer mapping resources exhausted") \
  X(cudaErrorMisalignedAddress, 716, "misaligned address") \
  X(cudaErrorHostMemoryAlreadyRegistered, 712, "part or all of the requested memory range is already mapped") \
  X(cudaErrorHostMemoryNotRegistered, 713, "pointer does not correspond to a registered memory region") \
  X(cudaErrorLaunchFailure, 719, "unspecified launch failure") \
  X(cudaErrorCooperativeLaunchTooLarge, 720, "too many blocks in cooperative launch") \
  X(cudaErrorNotSupported, 801, "operation not supported") \
  X(cudaErrorStreamCaptureUnsupported, 900, "operation not permitted when stream is capturing") \
  X(cudaErrorStreamCaptureInvalidated, 901, "operation failed due to a previous error during capture") \
  X(cudaErrorStreamCaptureMerge, 902, "operation would result in a merge of separate capture sequences") \
  X(cudaErrorStreamCaptureUnmatched, 903, "capture was not ended in the same stream as it began") \
  X(cudaErrorStreamCaptureUnjoined, 904, "capturing stream has unjoined work") \
  X(cudaErrorStreamCaptureIsolation, 905, "dependency created on uncaptured work in another stream") \
  X(cudaErrorStreamCaptureImplicit, 906, "operation would make the legacy stream depend on a capturing blocking stream") \
  X(cudaErrorCapturedEvent, 907, "operation not permitted on an event last recorded in a capturing stream") \
  X(cudaErrorStreamCaptureWrongThread, 908, "attempt to terminate a thread-local capture sequence from another thread") \
  X(cudaErrorGraphExecUpdateFailure, 910, "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update") \
  X(cudaErrorUnknown, 999, "unknown error") \
  X(cudaErrorApiFailureBase, 10000, "api failure base")

#define POLYPY_ERROR_ENUM(name, value, message) name = value,
typedef enum cudaError { POLYPY_CUDA_ERRORS(POLYPY_ERROR_ENUM) } cudaError_t;
#undef POLYPY_ERROR_ENUM
/* The driver API's status (<cuda.h>): programs compare runtime results with CUDA_SUCCESS. */
typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101
} CUresult;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

static inline const char* cudaGetErrorString(cudaError_t e) {
#define POLYPY_ERROR_MESSAGE(name, value, message) case name: return message;
  switch (e) { POLYPY_CUDA_ERRORS(POLYPY_ERROR_MESSAGE) }
#undef POLYPY_ERROR_MESSAGE
  return "unrecognized error code";
}
static inline const char* cudaGetErrorName(cudaError_t e) {
#define POLYPY_ERROR_NAME(name, value, message) case name: return #name;
  switch (e) { POLYPY_CUDA_ERRORS(POLYPY_ERROR_NAME) }
#undef POLYPY_ERROR_NAME
  return "cudaErrorUnknown";
}

/* The last error, as CUDA keeps it: per host thread, an API call that fails records its error;
 * cudaGetLastError returns it and resets it, cudaPeekAtLastError only returns it. A stream's
 * worker records the error of a piece of work in the last error of the host thread that issued
 * it (parts/queues.h sets the redirection while the work runs). A failure inside a kernel (a
 * device-side assert) is sticky, as on a device: it is the process's, what every later
 * synchronization returns and every thread's last error while its own is cudaSuccess;
 * cudaGetLastError cannot reset it, only cudaDeviceReset does. Launches complete before they
 * return, so a kernel's failure is known when its launch returns. Each thread's own slot is on
 * the heap, never freed: work a thread issued may fail after the thread has ended. */
POLYPY_RT_STATE cudaError_t** polypy_rt_error_redirect() { static __thread cudaError_t* to = 0; return &to; }
POLYPY_RT_STATE cudaError_t* polypy_rt_own_error() {
  static __thread cudaError_t* e = 0;
  if (!e) e = (cudaError_t*)calloc(1, sizeof(cudaError_t)); /* cudaSuccess is 0 */
  return e;
}
static inline cudaError_t* polypy_rt_last_error(void) {
  POLYPY_RT_HOOKED(polypy_rt_queue_push, { cudaError_t* to = *polypy_rt_error_redirect(); if (to) return to; });
  return polypy_rt_own_error();
}
POLYPY_RT_STATE cudaError_t* polypy_rt_sticky_error() { static cudaError_t e = cudaSuccess; return &e; }
static inline cudaError_t polypy_rt_fail(cudaError_t e) { *polypy_rt_last_error() = e; return e; }
static inline cudaError_t polypy_rt_fail_sticky(cudaError_t e) { *polypy_rt_sticky_error() = e; return polypy_rt_fail(e); }
static inline cudaError_t cudaPeekAtLastError(void) {
  cudaError_t e = *polypy_rt_last_error();
  return e != cudaSuccess ? e : *polypy_rt_sticky_error();
}
static inline cudaError_t cudaGetLastError(void) {
  cudaError_t e = cudaPeekAtLastError();
  *polypy_rt_last_error() = cudaSuccess;
  return e;
}

/* A host loop of launches merged into one parallel region (codegen/c/merged_loops.py): every
 * thread of the team runs the loop's scalar host code, the launches share each grid's blocks
 * among the team (an orphaned `omp for`) and end at a barrier. The flag says that this thread is
 * in such a loop; the leader (thread 0) is the one that records a launch's error. */
#ifdef __cplusplus
POLYPY_RT_STATE bool* polypy_rt_team_flag() { static thread_local bool in = false; return &in; }
static inline bool polypy_rt_in_team() { return *polypy_rt_team_flag(); }
/* Whether the last launch of the merged loop ran on the leader alone: the next launch the team
 * shares waits for it at a barrier first. Every thread decides alike, so each keeps its own. */
POLYPY_RT_STATE bool* polypy_rt_team_pending() { static thread_local bool pending = false; return &pending; }
struct polypy_rt_team_scope {
  polypy_rt_team_scope() { *polypy_rt_team_flag() = true; *polypy_rt_team_pending() = false; }
  ~polypy_rt_team_scope() { *polypy_rt_team_flag() = false; }
};
static inline bool polypy_rt_team_leader() {
#ifdef _OPENMP
  return omp_get_thread_num() == 0;
#else
  return true;
#endif
}
#else
#define polypy_rt_in_team() 0
#define polypy_rt_team_leader() 1
#endif

/* Whether a launch configuration is one CUDA accepts; otherwise the launch does nothing and
 * records cudaErrorInvalidConfiguration, as on a device (in a merged loop, once: by the leader;
 * every thread sees the same configuration and returns alike). */
static inline bool polypy_rt_launch_shape_ok(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                             unsigned int by, unsigned int bz, size_t shmem_bytes) {
  bool ok = gx >= 1 && gy >= 1 && gz >= 1 && gx <= 2147483647u && gy <= 65535 && gz <= 65535 && bx >= 1 &&
            by >= 1 && bz >= 1 && bx <= 1024 && by <= 1024 && bz <= 64 && (unsigned long long)bx * by * bz <= 1024;
  (void)shmem_bytes;  /* any size: host memory is plentiful */
  if (ok) return true;
  POLYPY_RT_HOOKED(polypy_rt_team_scope, if (polypy_rt_in_team() && !polypy_rt_team_leader()) return false);
  polypy_rt_fail(cudaErrorInvalidConfiguration);
  return false;
}
/* Shared memory per block of compute capability 8.0: 48 KiB, up to 163 KiB through cudaFuncSetAttribute
 * (parts/kernels.h). A launch asking for more dynamic shared memory than its kernel's limit
 * (max_dynamic) runs nothing and records cudaErrorInvalidValue, as on a device. */
#define POLYPY_RT_SHARED_PER_BLOCK ((size_t)48 * 1024)
#define POLYPY_RT_SHARED_PER_BLOCK_OPTIN ((size_t)163 * 1024)
static inline bool polypy_rt_shared_ok(size_t shmem_bytes, size_t max_dynamic) {
  if (shmem_bytes <= max_dynamic) return true;
  POLYPY_RT_HOOKED(polypy_rt_team_scope, if (polypy_rt_in_team() && !polypy_rt_team_leader()) return false);
  return polypy_rt_fail(cudaErrorInvalidValue), false;
}
/* Waits of the default stream's work for the created streams' (parts/queues.h): the legacy stream's
 * wait for the blocking streams, a device-wide one (cudaDeviceSynchronize, cudaFree). The first
 * stream a program creates sets them, so that a program without streams calls, and carries, neither. */
#ifdef __cplusplus
struct polypy_rt_wait_hooks { void (*legacy)(void); void (*device)(void); };
POLYPY_RT_STATE struct polypy_rt_wait_hooks* polypy_rt_wait_hooks() { static struct polypy_rt_wait_hooks h = {0, 0}; return &h; }
static inline void polypy_rt_legacy_wait(void) {
  void (*wait)(void) = __atomic_load_n(&polypy_rt_wait_hooks()->legacy, __ATOMIC_ACQUIRE);
  if (wait) wait();
}
static inline void polypy_rt_device_wait(void) {
  void (*wait)(void) = __atomic_load_n(&polypy_rt_wait_hooks()->device, __ATOMIC_ACQUIRE);
  if (wait) wait();
}
/* A launcher's check (every translated launch calls it first): on the host, a launch of the legacy
 * default stream first waits for the blocking streams' work; a stream's worker runs its launches
 * in its stream's order already. */
static inline bool polypy_rt_launch_ok(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                       unsigned int by, unsigned int bz, size_t shmem_bytes) {
  POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());
  return polypy_rt_launch_shape_ok(gx, gy, gz, bx, by, bz, shmem_bytes);
}
#else
#define polypy_rt_launch_ok polypy_rt_launch_shape_ok
#endif

