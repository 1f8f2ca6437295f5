#ifndef POLYPY_TIME_H
#define POLYPY_TIME_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef long time_t;
typedef long clock_t;
typedef int clockid_t;
struct timespec { time_t tv_sec; long tv_nsec; };
#define CLOCK_REALTIME 0
#define CLOCK_MONOTONIC 1
#define CLOCKS_PER_SEC 1000000L
int clock_gettime(clockid_t clk, struct timespec* ts);
clock_t clock(void);
time_t time(time_t* t);
#ifdef __cplusplus
}
#endif
#endif
