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
 * device code) never waits so: its work is already in its stream's order. */
struct polypy_rt_queue {
  std::mutex mu;
  std::condition_variable cv;  /* work issued, work done, the queue closed */
  std::deque<std::function<void()>> work;
  unsigned long long issued = 0, done = 0;
  bool blocking = true, started = false, closing = false;
};
/* The queues of the live streams, for the legacy stream's waits and cudaDeviceSynchronize. */
POLYPY_RT_STATE std::mutex* polypy_rt_queues_mu() { static std::mutex mu; return &mu; }
POLYPY_RT_STATE std::vector<polypy_rt_queue*>* polypy_rt_queues() { static std::vector<polypy_rt_queue*> live; return &live; }
POLYPY_RT_STATE std::atomic<int>* polypy_rt_queue_count() { static std::atomic<int> n(0); return &n; }
/* Whether this thread is a stream's worker. */
POLYPY_RT_STATE bool* polypy_rt_worker_flag() { static thread_local bool worker = false; return &worker; }

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
  std::unique_lock<std::mutex> lock(q->mu);
  for (;;) {
    q->cv.wait(lock, [q]() { return !q->work.empty() || q->closing; });
    if (q->work.empty()) break;  /* closed, and everything issued is done */
    std::function<void()> w = std::move(q->work.front());
    q->work.pop_front();
    lock.unlock();
    w();
    lock.lock();
    ++q->done;
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
  q->work.push_back(std::move(w));
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
static inline void polypy_rt_queue_wait(polypy_rt_queue* q, unsigned long long ticket) {
  std::unique_lock<std::mutex> lock(q->mu);
  q->cv.wait(lock, [q, ticket]() { return q->done >= ticket; });
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
  if (*polypy_rt_worker_flag()) return;
  fprintf(stderr, "%s: error: kernel '%s' waits for a store by the host or another stream; polypy runs it only "
          "on a created stream, whose work runs alongside the host (launched on the default stream it would "
          "wait forever)\n", where, kernel);
  exit(1);
}
