/* polypy runtime: the work queues of streams (part of cuda_runtime.h; the streams themselves are
 * parts/streams.h).
 *
 * Each stream a program creates has a queue and, from its first piece of work on, a worker thread
 * that runs the queue's work in issue order while the host goes on. A piece of work gets a ticket
 * (the count of work issued to the queue so far); the queue counts the work done, so "the work
 * issued before this call is complete" is `done >= ticket` with the ticket taken at the call.
 *
 * The default stream runs its work on the calling thread, before the call returns, as before. As
 * the legacy default stream does in CUDA, that work first waits for the work issued so far to
 * every blocking stream (one created without cudaStreamNonBlocking); work issued to a blocking
 * stream afterwards follows it, as it is complete by then. A worker thread (and every piece of
 * device code) never waits so: its work is already in its stream's order.
 *
 * A kernel that waits for a store by the host (gpu2cpu/refuse_spin_waits.py) holds its queue
 * until the host stores. The host never waits silently for ever: while it waits, it checks that
 * some stream's work can still go on; once every stream with work pending has been held by such
 * a kernel, or waiting for another stream, for a while with nothing done meanwhile, the host (the
 * only one that could store) is waiting for itself, and the program stops naming the kernel. */
struct polypy_rt_queue {
  std::mutex mu;
  std::condition_variable cv;  /* work issued, work done, the queue closed */
  std::deque<std::function<void()>> work;
  unsigned long long issued = 0, done = 0;
  bool blocking = true, started = false, closing = false;
  const char* held_where = nullptr;  /* the kernel running now waits for the host: its location, */
  const char* held_kernel = nullptr;  /* and name */
  polypy_rt_queue* waits_on = nullptr;  /* the worker waits for this queue's work up to waits_for */
  unsigned long long waits_for = 0;
};
/* The queues of the live streams, for the legacy stream's waits and cudaDeviceSynchronize. */
POLYPY_RT_STATE std::mutex* polypy_rt_queues_mu() { static std::mutex mu; return &mu; }
POLYPY_RT_STATE std::vector<polypy_rt_queue*>* polypy_rt_queues() { static std::vector<polypy_rt_queue*> live; return &live; }
POLYPY_RT_STATE std::atomic<int>* polypy_rt_queue_count() { static std::atomic<int> n(0); return &n; }
/* Whether this thread is a stream's worker. */
POLYPY_RT_STATE bool* polypy_rt_worker_flag() { static thread_local bool worker = false; return &worker; }
/* The queue whose worker this thread is (null on the host). */
POLYPY_RT_STATE polypy_rt_queue** polypy_rt_worker_queue() { static thread_local polypy_rt_queue* q = nullptr; return &q; }
/* Counts the work done over all queues (the deadlock check: nothing done while it looks). */
POLYPY_RT_STATE std::atomic<unsigned long long>* polypy_rt_queues_progress() {
  static std::atomic<unsigned long long> n(0);
  return &n;
}

static inline void polypy_rt_queues_legacy_wait(void);
static inline void polypy_rt_queues_device_wait(void);
static inline polypy_rt_queue* polypy_rt_queue_new(bool blocking) {
  __atomic_store_n(&polypy_rt_wait_hooks()->legacy, &polypy_rt_queues_legacy_wait, __ATOMIC_RELEASE);
  __atomic_store_n(&polypy_rt_wait_hooks()->device, &polypy_rt_queues_device_wait, __ATOMIC_RELEASE);
  polypy_rt_queue* q = new polypy_rt_queue();
  q->blocking = blocking;
  std::lock_guard<std::mutex> lock(*polypy_rt_queues_mu());
  polypy_rt_queues()->push_back(q);
  polypy_rt_queue_count()->fetch_add(1);
  return q;
}
/* A queue leaves the live ones once its stream is destroyed and its work done. */
static inline void polypy_rt_queue_forget(polypy_rt_queue* q) {
  std::lock_guard<std::mutex> lock(*polypy_rt_queues_mu());
  std::vector<polypy_rt_queue*>* live = polypy_rt_queues();
  for (size_t i = 0; i < live->size(); ++i)
    if ((*live)[i] == q) { live->erase(live->begin() + (long)i); break; }
  polypy_rt_queue_count()->fetch_sub(1);
}
static inline void polypy_rt_queue_worker(polypy_rt_queue* q) {
  *polypy_rt_worker_flag() = true;
  *polypy_rt_worker_queue() = q;
  std::unique_lock<std::mutex> lock(q->mu);
  for (;;) {
    q->cv.wait(lock, [q]() { return !q->work.empty() || q->closing; });
    if (q->work.empty()) break;  /* closed, and everything issued is done */
    std::function<void()> w = std::move(q->work.front());
    q->work.pop_front();
    lock.unlock();
    w();
    lock.lock();
    q->held_where = q->held_kernel = nullptr;
    ++q->done;
    polypy_rt_queues_progress()->fetch_add(1);
    q->cv.notify_all();
  }
  lock.unlock();
  polypy_rt_queue_forget(q);
}
/* Issues w to q; returns its ticket. The worker starts with the queue's first work. */
static inline unsigned long long polypy_rt_queue_push(polypy_rt_queue* q, std::function<void()> w) {
  std::lock_guard<std::mutex> lock(q->mu);
  if (q->closing && !q->started) return q->issued;  /* a destroyed stream's: nothing runs it */
  if (!q->started) {
    std::thread(polypy_rt_queue_worker, q).detach();
    q->started = true;
  }
  cudaError_t* origin = polypy_rt_last_error();  /* the issuing host thread's (parts/errors.h) */
  q->work.push_back([origin, w]() {
    *polypy_rt_error_redirect() = origin;
    w();
    *polypy_rt_error_redirect() = 0;
  });
  unsigned long long ticket = ++q->issued;
  q->cv.notify_all();
  return ticket;
}
static inline unsigned long long polypy_rt_queue_ticket(polypy_rt_queue* q) {
  std::lock_guard<std::mutex> lock(q->mu);
  return q->issued;
}
static inline bool polypy_rt_queue_reached(polypy_rt_queue* q, unsigned long long ticket) {
  std::lock_guard<std::mutex> lock(q->mu);
  return q->done >= ticket;
}
static inline void polypy_rt_queues_check_stall(unsigned* stalled, unsigned long long* progress);
/* Waits for q's work up to ticket. A worker says what it waits for (the host's deadlock check
 * reads it); the host wakes now and then to check that the wait can still end. */
static inline void polypy_rt_queue_wait(polypy_rt_queue* q, unsigned long long ticket) {
  polypy_rt_queue* self = *polypy_rt_worker_queue();
  if (self) {
    std::lock_guard<std::mutex> lock(self->mu);
    self->waits_on = q;
    self->waits_for = ticket;
  }
  {
    std::unique_lock<std::mutex> lock(q->mu);
    unsigned stalled = 0;
    unsigned long long progress = 0;
    if (self) q->cv.wait(lock, [q, ticket]() { return q->done >= ticket; });
    else
      while (!q->cv.wait_for(lock, std::chrono::milliseconds(20), [q, ticket]() { return q->done >= ticket; })) {
        lock.unlock();
        polypy_rt_queues_check_stall(&stalled, &progress);
        lock.lock();
      }
  }
  if (self) {
    std::lock_guard<std::mutex> lock(self->mu);
    self->waits_on = nullptr;
  }
}
/* A destroyed stream's queue: the worker finishes the work issued, leaves the live queues and
 * ends. The queue itself is kept (events recorded in it still ask it whether their work is done). */
static inline void polypy_rt_queue_close(polypy_rt_queue* q) {
  bool idle;
  {
    std::lock_guard<std::mutex> lock(q->mu);
    q->closing = true;
    idle = !q->started;
    q->cv.notify_all();
  }
  if (idle) polypy_rt_queue_forget(q);
}
/* Waits for the work issued so far to every live queue (every blocking one when only_blocking):
 * tickets taken first, then waited for, so work issued meanwhile is not waited for. */
static inline void polypy_rt_queues_wait(bool only_blocking) {
  if (polypy_rt_queue_count()->load() == 0) return;
  std::vector<std::pair<polypy_rt_queue*, unsigned long long>> tickets;
  {
    std::lock_guard<std::mutex> lock(*polypy_rt_queues_mu());
    for (polypy_rt_queue* q : *polypy_rt_queues())
      if (q->blocking || !only_blocking) tickets.push_back(std::make_pair(q, polypy_rt_queue_ticket(q)));
  }
  for (auto& t : tickets) polypy_rt_queue_wait(t.first, t.second);
}
/* Whether this thread's work is stream-ordered already: a stream's worker, or device code (a
 * parallel region that is not a merged host loop's team). */
static inline bool polypy_rt_ordered_already(void) {
  if (*polypy_rt_worker_flag()) return true;
#ifdef _OPENMP
  if (omp_in_parallel() && !polypy_rt_in_team()) return true;
#endif
  return false;
}
/* Work of the legacy default stream: first the work issued to every blocking stream (the hooks
 * of parts/errors.h). */
static inline void polypy_rt_queues_legacy_wait(void) {
  if (polypy_rt_queue_count()->load(std::memory_order_relaxed) == 0 || polypy_rt_ordered_already()) return;
  polypy_rt_queues_wait(true);
}
static inline void polypy_rt_queues_device_wait(void) {
  if (!*polypy_rt_worker_flag()) polypy_rt_queues_wait(false);
}
/* The launcher of a kernel that polls memory only the host or another stream can write
 * (gpu2cpu/refuse_spin_waits.py): on a stream's worker the host goes on and can release it; on
 * the calling thread nothing could, and the program stops with an error instead of waiting. */
static inline void polypy_rt_host_released(const char* where, const char* kernel) {
  if (polypy_rt_queue* q = *polypy_rt_worker_queue()) {
    std::lock_guard<std::mutex> lock(q->mu);
    q->held_where = where;
    q->held_kernel = kernel;
    return;
  }
  if (*polypy_rt_worker_flag()) return;
  fprintf(stderr, "%s: error: kernel '%s' waits for a store by the host or another stream; polypy runs it only "
          "on a created stream, whose work runs alongside the host (launched on the default stream it would "
          "wait forever)\n", where, kernel);
  exit(1);
}
/* The host's check while it waits: whether every live queue with work pending runs a kernel that
 * waits for the host, or waits for another queue's work not done yet. Then only the host could
 * store, and it waits: once that has held over 50 checks (a second) with no work done meanwhile
 * (a kernel just released has had time to end), the program stops, as a GPU would hang there.
 * Other host threads (std::thread) are not seen: one that would store later is not waited for. */
static inline void polypy_rt_queues_check_stall(unsigned* stalled, unsigned long long* progress) {
  unsigned long long now = polypy_rt_queues_progress()->load();
  const char* where = nullptr;
  const char* kernel = nullptr;
  bool stuck = true;
  {
    std::lock_guard<std::mutex> lock(*polypy_rt_queues_mu());
    for (polypy_rt_queue* q : *polypy_rt_queues()) {
      polypy_rt_queue* on;
      unsigned long long upto;
      {
        std::lock_guard<std::mutex> ql(q->mu);
        if (q->done >= q->issued) continue;
        if (q->held_kernel) {
          if (!kernel) where = q->held_where, kernel = q->held_kernel;
          continue;
        }
        on = q->waits_on;
        upto = q->waits_for;
      }
      if (!on || polypy_rt_queue_reached(on, upto)) {
        stuck = false;
        break;
      }
    }
  }
  if (!stuck || !kernel || (*stalled > 0 && now != *progress)) {
    *stalled = 0;
    *progress = now;
    return;
  }
  if (*stalled == 0) *progress = now;
  if (++*stalled < 50) return;
  fflush(stdout);
  fprintf(stderr, "%s: error: kernel '%s' waits for a store by the host, but the host waits for the stream work it "
          "holds: a call that waits for a stream (a synchronization, or work of the default stream, which polypy "
          "runs on the host's thread) after the launch and before the host's store; the program would wait for "
          "ever\n", where, kernel);
  fflush(stderr);
  _Exit(1);  /* not exit: the held kernels' workers still run */
}
