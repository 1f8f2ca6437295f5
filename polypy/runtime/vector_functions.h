/* <vector_functions.h> of the CUDA toolkit, for polypy: everything a program uses from it is in polypy's
 * runtime header (types, runtime API) and device prelude (built-in variables, intrinsics).
 * In a translated program this include is replaced by the runtime pasted at the top. */
#ifndef POLYPY_ALIAS_VECTOR_FUNCTIONS_H
#define POLYPY_ALIAS_VECTOR_FUNCTIONS_H
#include <cuda_runtime.h>
#endif
