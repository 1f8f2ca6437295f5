/* The timer of the CUDA samples' <helper_timer.h> (StopWatchInterface, sdkCreateTimer ...),
 * written for polypy on a monotonic wall clock. Times are in milliseconds; the average is the
 * total over the number of completed start/stop intervals. */
#ifndef POLYPY_HELPER_TIMER_H
#define POLYPY_HELPER_TIMER_H
#include <cuda_runtime.h>

class StopWatchInterface {
 public:
  void start() { started_at_ = polypy_rt_now_ms(); running_ = true; }
  void stop() {
    if (!running_) return;
    total_ += polypy_rt_now_ms() - started_at_;
    running_ = false;
    ++intervals_;
  }
  void reset() { total_ = 0; intervals_ = 0; if (running_) started_at_ = polypy_rt_now_ms(); }
  float getTime() const { return (float)(total_ + (running_ ? polypy_rt_now_ms() - started_at_ : 0.0)); }
  float getAverageTime() const { return intervals_ ? (float)(total_ / intervals_) : 0.0f; }

 private:
  double started_at_ = 0, total_ = 0;
  int intervals_ = 0;
  bool running_ = false;
};

static inline bool sdkCreateTimer(StopWatchInterface** timer) { *timer = new StopWatchInterface(); return true; }
static inline bool sdkDeleteTimer(StopWatchInterface** timer) { delete *timer; *timer = 0; return true; }
static inline bool sdkStartTimer(StopWatchInterface** timer) { if (*timer) (*timer)->start(); return true; }
static inline bool sdkStopTimer(StopWatchInterface** timer) { if (*timer) (*timer)->stop(); return true; }
static inline bool sdkResetTimer(StopWatchInterface** timer) { if (*timer) (*timer)->reset(); return true; }
static inline float sdkGetTimerValue(StopWatchInterface** timer) { return *timer ? (*timer)->getTime() : 0.0f; }
static inline float sdkGetAverageTimerValue(StopWatchInterface** timer) {
  return *timer ? (*timer)->getAverageTime() : 0.0f;
}

#endif /* POLYPY_HELPER_TIMER_H */
