/* The part of the CUDA samples' <helper_cuda.h> that programs use, for polypy (written for
 * polypy, not taken from the samples): checkCudaErrors, getLastCudaError, printLastCudaError,
 * findCudaDevice, gpuGetMaxGflopsDeviceId. A failure prints where it happened and exits, as
 * the samples' version does. A translated program inlines this file where it is included. */
#ifndef POLYPY_HELPER_CUDA_H
#define POLYPY_HELPER_CUDA_H
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

/* Any status type: cudaError_t, or an int from a driver-style call (0 is success). */
template <class Status>
static inline void polypy_check_cuda(Status status, const char* call, const char* file, int line) {
  if (status != 0) {
    fprintf(stderr, "CUDA error at %s:%d code=%d(%s) \"%s\"\n", file, line, (int)status,
            cudaGetErrorString((cudaError_t)status), call);
    exit(EXIT_FAILURE);
  }
}
#define checkCudaErrors(val) polypy_check_cuda((val), #val, __FILE__, __LINE__)

static inline void polypy_last_cuda_error(const char* message, const char* file, int line, bool fatal) {
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    fprintf(stderr, "%s(%d) : getLastCudaError() CUDA error : %s : (%d) %s.\n", file, line, message, (int)status,
            cudaGetErrorString(status));
    if (fatal) exit(EXIT_FAILURE);
  }
}
#define getLastCudaError(msg) polypy_last_cuda_error((msg), __FILE__, __LINE__, true)
#define printLastCudaError(msg) polypy_last_cuda_error((msg), __FILE__, __LINE__, false)

/* polypy has one device: the CPU. */
static inline int gpuGetMaxGflopsDeviceId(void) { return 0; }
static inline int findCudaDevice(int argc = 0, const char** argv = 0) {
  (void)argc;
  (void)argv;
  checkCudaErrors(cudaSetDevice(0));
  return 0;
}
static inline int findCudaDevice(int argc, char** argv) { return findCudaDevice(argc, (const char**)argv); }
static inline int _ConvertSMVer2Cores(int major, int minor) { (void)major; (void)minor; return 1; }

#endif /* POLYPY_HELPER_CUDA_H */
