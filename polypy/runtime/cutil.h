/* The macros of the old CUDA SDK's <cutil.h> that programs still use, written for polypy:
 * checked calls (CUDA_SAFE_CALL, cutilSafeCall, CUT_SAFE_CALL), error checks after launches
 * (CUT_CHECK_ERROR, cutilCheckMsg) and the cut*Timer functions on a wall clock. */
#ifndef POLYPY_CUTIL_H
#define POLYPY_CUTIL_H
#include <helper_cuda.h>
#include <helper_timer.h>

#define CUDA_SAFE_CALL(call) checkCudaErrors(call)
#define CUDA_SAFE_CALL_NO_SYNC(call) checkCudaErrors(call)
#define cutilSafeCall(call) checkCudaErrors(call)
#define cutilSafeCallNoSync(call) checkCudaErrors(call)
#define CUT_CHECK_ERROR(msg) getLastCudaError(msg)
#define cutilCheckMsg(msg) getLastCudaError(msg)
#define CUT_DEVICE_INIT(argc, argv) findCudaDevice((argc), (argv))
#define CUT_EXIT(argc, argv) exit(EXIT_SUCCESS)

typedef enum { CUTFalse = 0, CUTTrue = 1 } CUTBoolean;
#define CUT_SAFE_CALL(call) \
  do { if ((call) != CUTTrue) { fprintf(stderr, "cutil error in %s:%d\n", __FILE__, __LINE__); exit(EXIT_FAILURE); } } while (0)
#define cutilCheckError(call) CUT_SAFE_CALL(call)

/* Timers by handle: the handle indexes a small table of stopwatches. */
static inline StopWatchInterface** polypy_cut_timers(void) { static StopWatchInterface* t[64] = {0}; return t; }
static inline CUTBoolean cutCreateTimer(unsigned int* name) {
  StopWatchInterface** t = polypy_cut_timers();
  for (unsigned int i = 0; i < 64; ++i)
    if (!t[i]) { sdkCreateTimer(&t[i]); *name = i; return CUTTrue; }
  return CUTFalse;
}
static inline CUTBoolean cutDeleteTimer(unsigned int name) {
  if (name >= 64 || !polypy_cut_timers()[name]) return CUTFalse;
  sdkDeleteTimer(&polypy_cut_timers()[name]);
  return CUTTrue;
}
static inline CUTBoolean cutStartTimer(unsigned int name) { return name < 64 && sdkStartTimer(&polypy_cut_timers()[name]) ? CUTTrue : CUTFalse; }
static inline CUTBoolean cutStopTimer(unsigned int name) { return name < 64 && sdkStopTimer(&polypy_cut_timers()[name]) ? CUTTrue : CUTFalse; }
static inline CUTBoolean cutResetTimer(unsigned int name) { return name < 64 && sdkResetTimer(&polypy_cut_timers()[name]) ? CUTTrue : CUTFalse; }
static inline float cutGetTimerValue(unsigned int name) { return name < 64 ? sdkGetTimerValue(&polypy_cut_timers()[name]) : 0.0f; }
static inline float cutGetAverageTimerValue(unsigned int name) {
  return name < 64 ? sdkGetAverageTimerValue(&polypy_cut_timers()[name]) : 0.0f;
}

#endif /* POLYPY_CUTIL_H */
