/* polypy runtime: launches from device code (CUDA dynamic parallelism; part of cuda_runtime.h).
 *
 * CUDA 12's rules: a child grid sees every write its parent thread made before the launch; a
 * parent grid is not complete until all its children (recursively) are; children that a block
 * launches into one stream run in launch order; a parent never waits for a child. polypy runs
 * one schedule those rules allow: each child after its parent grid has finished, in launch order
 * (cudaStreamTailLaunch children after all the grid's other children), a child's own children
 * right after it -- so every stream's order holds, whatever stream a launch names.
 *
 * The launcher of a kernel that launches from device code opens a polypy_rt_cdp_grid (below): the
 * grid's threads, on several CPU threads, append their launches to it under a lock (each a
 * closure holding the arguments' values), and when the grid's blocks are done the launcher runs
 * them, each through the child's own launcher, before it returns. One such grid is open at a
 * time in the whole program (a host thread launching such a kernel waits for another's to end):
 * the device code finds it through one pointer. */
#ifdef __cplusplus
enum polypy_rt_cdp_stream { polypy_rt_cdp_ordinary = 0, polypy_rt_cdp_tail = 1, polypy_rt_cdp_fire_and_forget = 2 };

/* CUDA's nesting limit: a grid launched by the host has depth 0, its children depth 1, ... */
#define POLYPY_RT_CDP_MAX_DEPTH 24

struct polypy_rt_cdp_grid;
POLYPY_RT_STATE polypy_rt_cdp_grid** polypy_rt_cdp_current() {
  static polypy_rt_cdp_grid* g = 0;
  return &g;
}
POLYPY_RT_STATE int* polypy_rt_cdp_depth() { /* the depth of the grids now being launched */
  static int depth = 0;
  return &depth;
}
/* Without OpenMP (the frontend's parse) there is one thread and nothing to lock. */
#ifdef _OPENMP
POLYPY_RT_STATE omp_nest_lock_t* polypy_rt_cdp_host_lock() {
  static omp_nest_lock_t lock;
  static bool ready = (omp_init_nest_lock(&lock), true);
  (void)ready;
  return &lock;
}
#define POLYPY_RT_CDP_LOCK(x) x
#else
#define POLYPY_RT_CDP_LOCK(x)
#endif

struct polypy_rt_cdp_grid {
  std::vector<std::function<void()>> launches, tail;
  POLYPY_RT_CDP_LOCK(omp_lock_t lock;)
  polypy_rt_cdp_grid* outer;
  int depth;
  polypy_rt_cdp_grid() : outer(0), depth(0) {
    POLYPY_RT_CDP_LOCK(omp_set_nest_lock(polypy_rt_cdp_host_lock()));
    POLYPY_RT_CDP_LOCK(omp_init_lock(&lock));
    outer = *polypy_rt_cdp_current();
    depth = *polypy_rt_cdp_depth();
    *polypy_rt_cdp_current() = this;
  }
  /* The grid's blocks are done: its children run, in order, each one with its own children. */
  ~polypy_rt_cdp_grid() {
    *polypy_rt_cdp_current() = outer;
    int saved = *polypy_rt_cdp_depth();
    *polypy_rt_cdp_depth() = depth + 1;
    for (size_t i = 0; i < launches.size(); ++i) launches[i]();
    for (size_t i = 0; i < tail.size(); ++i) tail[i]();
    *polypy_rt_cdp_depth() = saved;
    POLYPY_RT_CDP_LOCK(omp_destroy_lock(&lock));
    POLYPY_RT_CDP_LOCK(omp_unset_nest_lock(polypy_rt_cdp_host_lock()));
  }
  polypy_rt_cdp_grid(const polypy_rt_cdp_grid&) = delete;
  polypy_rt_cdp_grid& operator=(const polypy_rt_cdp_grid&) = delete;
};

/* A launch from device code (a thread of the grid now running): kept until the grid is done. */
template <class F>
static inline void polypy_rt_device_launch(int stream, F run) {
  polypy_rt_cdp_grid* g = *polypy_rt_cdp_current();
  if (!g) { /* only a launcher that opened a grid runs code that launches */
    fprintf(stderr, "polypy: internal error: a launch from device code outside a grid\n");
    abort();
  }
  if (g->depth + 1 > POLYPY_RT_CDP_MAX_DEPTH) {
    fprintf(stderr, "polypy: a kernel launch from device code at nesting depth %d, beyond CUDA's limit of %d "
            "(cudaErrorLaunchMaxDepthExceeded); polypy stops the program here\n", g->depth + 1,
            POLYPY_RT_CDP_MAX_DEPTH);
    fflush(stdout);
    exit(1);
  }
  POLYPY_RT_CDP_LOCK(omp_set_lock(&g->lock));
  (stream == polypy_rt_cdp_tail ? g->tail : g->launches).push_back(std::function<void()>(run));
  POLYPY_RT_CDP_LOCK(omp_unset_lock(&g->lock));
}
#endif
