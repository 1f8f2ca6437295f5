/* polypy runtime: kernels as host values (part of cuda_runtime.h).
 *
 * As with nvcc, a kernel's name in host code is its host stub: a host function of the kernel's
 * name and parameter types that polypy emits next to the kernel's translated code (and declares
 * wherever the kernel is declared, so a kernel defined in another file is called through C++
 * linkage). A launch through a pointer or of a kernel of another file pushes its configuration
 * (polypy_rt_push_config) and calls the stub, which pops it and launches, as nvcc's
 * __cudaPushCallConfiguration and stubs do. Each translated file registers its kernels' stubs at
 * start-up, so that cudaLaunchKernel and cudaFuncGetAttributes find a kernel by its address. */
#ifdef __cplusplus
/* A parameter type whose C spelling wraps the name (float (*)[4]) as a type a name can follow. */
template <class T> using polypy_rt_type = T;

struct polypy_rt_launch_config {
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
  bool pending;
};
POLYPY_RT_STATE polypy_rt_launch_config* polypy_rt_config() {
  static thread_local polypy_rt_launch_config c;
  return &c;
}
static inline void polypy_rt_push_config(dim3 grid, dim3 block, size_t shmem = 0, cudaStream_t stream = 0) {
  polypy_rt_launch_config* c = polypy_rt_config();
  c->grid = grid; c->block = block; c->shmem = shmem; c->stream = stream; c->pending = true;
}
/* The configuration of the launch a stub was called for; without one (a kernel's pointer called
 * without <<<...>>>) the call launches nothing and records cudaErrorMissingConfiguration. */
static inline bool polypy_rt_pop_config(dim3* grid, dim3* block, size_t* shmem, cudaStream_t* stream) {
  polypy_rt_launch_config* c = polypy_rt_config();
  if (!c->pending) {
    polypy_rt_fail(cudaErrorMissingConfiguration);
    return false;
  }
  c->pending = false;
  *grid = c->grid; *block = c->block; *shmem = c->shmem; *stream = c->stream;
  return true;
}

/* The registry: a kernel's stub address -> a launcher taking the arguments as cudaLaunchKernel
 * passes them (an array of pointers to each), its name, and its static shared memory. */
typedef void (*polypy_rt_args_launcher)(dim3 grid, dim3 block, size_t shmem, void** args);
struct polypy_rt_kernel_entry;
POLYPY_RT_STATE polypy_rt_kernel_entry** polypy_rt_kernel_list() {
  static polypy_rt_kernel_entry* head = 0;
  return &head;
}
struct polypy_rt_kernel_entry {
  const void* stub;
  polypy_rt_args_launcher launch;
  const char* name;
  size_t shared_bytes, const_bytes;
  size_t* max_dynamic; /* the kernel's launchers' limit on dynamic shared memory (cudaFuncSetAttribute) */
  polypy_rt_kernel_entry* next;
  polypy_rt_kernel_entry(const void* s, polypy_rt_args_launcher l, const char* n, size_t shared, size_t constant,
                         size_t* dynamic = 0)
      : stub(s), launch(l), name(n), shared_bytes(shared), const_bytes(constant), max_dynamic(dynamic),
        next(*polypy_rt_kernel_list()) {
    *polypy_rt_kernel_list() = this;
  }
};
static inline const polypy_rt_kernel_entry* polypy_rt_find_kernel(const void* stub) {
  for (const polypy_rt_kernel_entry* e = *polypy_rt_kernel_list(); e; e = e->next)
    if (e->stub == stub) return e;
  return 0;
}
static inline size_t polypy_rt_default_dynamic(size_t shared_bytes) {
  return shared_bytes < POLYPY_RT_SHARED_PER_BLOCK ? POLYPY_RT_SHARED_PER_BLOCK - shared_bytes : 0;
}
/* A kernel's attributes. cudaFuncAttributeMaxDynamicSharedMemorySize sets the dynamic shared
 * memory its launches may ask for (parts/errors.h: polypy_rt_shared_ok), at most 163 KiB with its
 * static __shared__ arrays (else cudaErrorInvalidValue, as on a compute capability 8.0 device);
 * the carve-out is a percentage (or -1) that changes nothing on a CPU; the cluster attributes
 * change nothing either (no launch here has clusters). */
static inline cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
  const polypy_rt_kernel_entry* k = polypy_rt_find_kernel(func);
  if (!k) return polypy_rt_fail(cudaErrorInvalidDeviceFunction);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || (size_t)value + k->shared_bytes > POLYPY_RT_SHARED_PER_BLOCK_OPTIN)
      return polypy_rt_fail(cudaErrorInvalidValue);
    if (k->max_dynamic) *k->max_dynamic = (size_t)value;
  } else if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) {
    if (value < -1 || value > 100) return polypy_rt_fail(cudaErrorInvalidValue);
  } else if (attr < cudaFuncAttributeMaxDynamicSharedMemorySize || attr > cudaFuncAttributeClusterSchedulingPolicyPreference) {
    return polypy_rt_fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaFuncSetAttribute(T* func, enum cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute((const void*)func, attr, value);
}

static inline cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shmem = 0,
                                           cudaStream_t stream = 0) {
  const polypy_rt_kernel_entry* k = polypy_rt_find_kernel(func);
  if (!k) return polypy_rt_fail(cudaErrorInvalidDeviceFunction);
  if (polypy_rt_capturing(stream)) { /* a kernel node holding the arguments' values (parts/graphs.h) */
    const struct polypy_rt_kernel* bound = polypy_rt_kernel_of(func);
    if (!bound) return polypy_rt_fail(cudaErrorInvalidDeviceFunction);
    cudaError_t e = polypy_rt_capture(stream, cudaGraphNodeTypeKernel, bound->bind(func, grid, block, shmem, args));
    if (e == cudaSuccess) polypy_rt_stream_of(stream)->capture->tail.back()->function = func;
    return e;
  }
  struct polypy_rt_queue* q = polypy_rt_queue_of(stream);
  if (q && !*polypy_rt_worker_flag()) { /* a created stream's worker runs a closure of the arguments' values */
    const struct polypy_rt_kernel* bound = polypy_rt_kernel_of(func);
    if (!bound) return polypy_rt_fail(cudaErrorInvalidDeviceFunction);
    if (!polypy_rt_launch_shape_ok(grid.x, grid.y, grid.z, block.x, block.y, block.z, shmem))
      return cudaErrorInvalidConfiguration;
    std::function<cudaError_t()> run = bound->bind(func, grid, block, shmem, args);
    polypy_rt_queue_push(q, [run]() { (void)run(); });
    return cudaSuccess;
  }
  if (!polypy_rt_launch_ok(grid.x, grid.y, grid.z, block.x, block.y, block.z, shmem))
    return cudaErrorInvalidConfiguration;
  k->launch(grid, block, shmem, args); /* the default stream's launches complete before they return */
  return cudaSuccess;
}
/* A cooperative launch: every block resident at once, which grid.sync() needs. The device holds one
 * block per multiprocessor (the occupancy API's answer, parts/execution.h), so a grid of more blocks
 * than multiprocessors is cudaErrorCooperativeLaunchTooLarge. A kernel with grid.sync() runs each
 * block on its own thread (its launcher, docs/cooperative_groups.md); any other kernel runs as
 * cudaLaunchKernel runs it. */
static inline cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block, void** args,
                                                      size_t shmem = 0, cudaStream_t stream = 0) {
  const polypy_rt_kernel_entry* k = polypy_rt_find_kernel(func);
  if (!k) return polypy_rt_fail(cudaErrorInvalidDeviceFunction);
  if (polypy_rt_capturing(stream)) return polypy_rt_fail(cudaErrorStreamCaptureUnsupported);
  if (!polypy_rt_launch_ok(grid.x, grid.y, grid.z, block.x, block.y, block.z, shmem))
    return cudaErrorInvalidConfiguration;
  int per_sm = 0;
  polypy_rt_occupancy_blocks(&per_sm, (int)(block.x * block.y * block.z), shmem);
  if ((unsigned long long)grid.x * grid.y * grid.z > (unsigned long long)per_sm * polypy_rt_cores())
    return polypy_rt_fail(cudaErrorCooperativeLaunchTooLarge);
  polypy_rt_stream_drain(stream);  /* runs on the calling thread, after the stream's work */
  k->launch(grid, block, shmem, args);
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaLaunchCooperativeKernel(T* func, dim3 grid, dim3 block, void** args, size_t shmem = 0,
                                                      cudaStream_t stream = 0) {
  return cudaLaunchCooperativeKernel((const void*)func, grid, block, args, shmem, stream);
}
template <class T>
static inline cudaError_t cudaLaunchKernel(T* func, dim3 grid, dim3 block, void** args, size_t shmem = 0,
                                           cudaStream_t stream = 0) {
  return cudaLaunchKernel((const void*)func, grid, block, args, shmem, stream);
}

/* What the CPU device runs a kernel with (parts/device.h): any block of up to 1024 threads, the
 * kernel's own __shared__ and __constant__ arrays, the rest of 48 KiB of shared memory for a
 * launch's dynamic part (or what cudaFuncSetAttribute set). Registers and local memory are the compiler's business on a GPU; on the
 * CPU a thread's values live in the block function's frame: 0. The versions are the device's
 * compute capability (8.0). */
struct cudaFuncAttributes {
  size_t sharedSizeBytes, constSizeBytes, localSizeBytes;
  int maxThreadsPerBlock, numRegs, ptxVersion, binaryVersion, cacheModeCA, maxDynamicSharedSizeBytes;
  int preferredShmemCarveout;
};
static inline cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes* attr, const void* func) {
  const polypy_rt_kernel_entry* k = polypy_rt_find_kernel(func);
  if (!attr) return polypy_rt_fail(cudaErrorInvalidValue);
  if (!k) return polypy_rt_fail(cudaErrorInvalidDeviceFunction);
  memset(attr, 0, sizeof *attr);
  attr->sharedSizeBytes = k->shared_bytes;
  attr->constSizeBytes = k->const_bytes;
  attr->localSizeBytes = 0;
  attr->maxThreadsPerBlock = 1024;
  attr->numRegs = 0;
  attr->ptxVersion = attr->binaryVersion = 80;
  attr->cacheModeCA = 0;
  attr->maxDynamicSharedSizeBytes = (int)(k->max_dynamic ? *k->max_dynamic : polypy_rt_default_dynamic(k->shared_bytes));
  attr->preferredShmemCarveout = -1;
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes* attr, T* func) {
  return cudaFuncGetAttributes(attr, (const void*)func);
}
/* A __host__ __device__ lambda passed to a kernel (frontend.closures): the lambda, which host code
 * calls, and the record of its captures, which the kernel's launcher takes (a base: the object
 * converts to it). Both are made where the program makes the lambda, from the same variables. */
template <class L, class R> struct polypy_closure : L, R {
  polypy_closure(const L& l, const R& r) : L(l), R(r) {}
  using L::operator();
};
template <class L, class R> static inline polypy_closure<L, R> polypy_close(const L& l, const R& r) {
  return polypy_closure<L, R>(l, r);
}
/* Whether F, a host function template's parameter, is the closure whose record is R: the record
 * itself (a __device__ lambda), or the object holding it (a __host__ __device__ one), also as a
 * reference (F&& f called with a stored lambda). */
template <class T> struct polypy_plain { typedef T type; };
template <class T> struct polypy_plain<T&> : polypy_plain<T> {};
template <class T> struct polypy_plain<T&&> : polypy_plain<T> {};
template <class T> struct polypy_plain<const T> : polypy_plain<T> {};
template <class T> struct polypy_plain<volatile T> : polypy_plain<T> {};
template <class T> struct polypy_plain<const volatile T> : polypy_plain<T> {};
template <class F, class R> struct polypy_is_closure {
  typedef typename polypy_plain<F>::type T;
  static constexpr bool value = __is_same(T, R) || __is_base_of(R, T);
};
#endif
