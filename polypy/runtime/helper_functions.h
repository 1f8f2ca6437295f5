/* The CUDA samples' <helper_functions.h>, for polypy: the error checks and the timers. */
#ifndef POLYPY_HELPER_FUNCTIONS_H
#define POLYPY_HELPER_FUNCTIONS_H
#include <helper_cuda.h>
#include <helper_timer.h>
#endif /* POLYPY_HELPER_FUNCTIONS_H */
