/* <cuda_profiler_api.h> of the CUDA toolkit, for polypy: cudaProfilerStart and cudaProfilerStop
 * are in polypy's runtime header (no profiler attaches to a translated program: both succeed and
 * do nothing). In a translated program this include is replaced by the runtime pasted at the top. */
#ifndef POLYPY_ALIAS_CUDA_PROFILER_API_H
#define POLYPY_ALIAS_CUDA_PROFILER_API_H
#include <cuda_runtime.h>
#endif
