/* The part of the CUDA samples' <helper_cuda.h> that programs use, for polypy (written for
 * polypy, not taken from the samples): checkCudaErrors, getLastCudaError, printLastCudaError,
 * findCudaDevice, gpuDeviceInit, gpuGetMaxGflopsDeviceId, checkCudaCapabilities, EXIT_WAIVED. NVIDIA's
 * own helper headers compile against polypy's runtime unchanged: a program built with `-I` of the
 * samples' Common directory gets those, and this file only where no such header is found. A failure prints where it happened and exits, as
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

/* The status a sample exits with when the machine lacks what it needs (the samples' value). */
#ifndef EXIT_WAIVED
#define EXIT_WAIVED 2
#endif

/* polypy has one device: the CPU. */
static inline int gpuGetMaxGflopsDeviceId(void) { return 0; }
/* Selects device `device`; returns it, or -1 (with a message) when there is no such device. */
static inline int gpuDeviceInit(int device) {
  int count = 0;
  checkCudaErrors(cudaGetDeviceCount(&count));
  if (device < 0) device = 0;
  if (device >= count) {
    fprintf(stderr, "gpuDeviceInit: device %d requested, but there are %d device(s) (0 to %d)\n", device, count,
            count - 1);
    return -1;
  }
  checkCudaErrors(cudaSetDevice(device));
  return device;
}
/* Whether the current device has compute capability major.minor or above. */
static inline bool checkCudaCapabilities(int major, int minor) {
  int device = 0, have_major = 0, have_minor = 0;
  checkCudaErrors(cudaGetDevice(&device));
  checkCudaErrors(cudaDeviceGetAttribute(&have_major, cudaDevAttrComputeCapabilityMajor, device));
  checkCudaErrors(cudaDeviceGetAttribute(&have_minor, cudaDevAttrComputeCapabilityMinor, device));
  if (have_major > major || (have_major == major && have_minor >= minor)) return true;
  fprintf(stderr, "device %d has compute capability %d.%d; %d.%d is required\n", device, have_major, have_minor,
          major, minor);
  return false;
}
static inline int findCudaDevice(int argc = 0, const char** argv = 0) {
  (void)argc;
  (void)argv;
  checkCudaErrors(cudaSetDevice(0));
  return 0;
}
static inline int findCudaDevice(int argc, char** argv) { return findCudaDevice(argc, (const char**)argv); }
static inline int _ConvertSMVer2Cores(int major, int minor) { (void)major; (void)minor; return 1; }

#endif /* POLYPY_HELPER_CUDA_H */
