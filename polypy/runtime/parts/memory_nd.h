/* polypy runtime: pitched 2-D and 3-D memory and copies, peer copies, pointer attributes, symbol
 * addresses (part of cuda_runtime.h).
 *
 * Rows of pitched allocations are padded to 64 bytes (cudaMallocPitch, parts/memory.h); a 3-D
 * allocation is height * depth such rows. Copies go row by row through cudaMemcpy, so each row is
 * checked and traced as a plain copy is. Copies to and from CUDA arrays are in parts/texture.h. */
struct cudaArray;
typedef struct cudaArray* cudaArray_t;
typedef const struct cudaArray* cudaArray_const_t;
struct cudaPitchedPtr { void* ptr; size_t pitch, xsize, ysize; };
struct cudaExtent { size_t width, height, depth; };
struct cudaPos { size_t x, y, z; };
struct cudaMemcpy3DParms {
  cudaArray_t srcArray;
  struct cudaPos srcPos;
  struct cudaPitchedPtr srcPtr;
  cudaArray_t dstArray;
  struct cudaPos dstPos;
  struct cudaPitchedPtr dstPtr;
  struct cudaExtent extent;
  enum cudaMemcpyKind kind;
};
static inline cudaError_t polypy_rt_memcpy3d_array(const struct cudaMemcpy3DParms* p); /* parts/texture.h */
static inline struct cudaPitchedPtr make_cudaPitchedPtr(void* d, size_t p, size_t xsz, size_t ysz) {
  struct cudaPitchedPtr r = {d, p, xsz, ysz};
  return r;
}
static inline struct cudaExtent make_cudaExtent(size_t w, size_t h, size_t d) {
  struct cudaExtent r = {w, h, d};
  return r;
}
static inline struct cudaPos make_cudaPos(size_t x, size_t y, size_t z) {
  struct cudaPos r = {x, y, z};
  return r;
}
/* extent.width in bytes, as for linear memory. */
static inline cudaError_t cudaMalloc3D(struct cudaPitchedPtr* p, struct cudaExtent extent) {
  if (!p) return polypy_rt_fail(cudaErrorInvalidValue);
  size_t pitch = 0;
  void* q = 0;
  cudaError_t e = cudaMallocPitch(&q, &pitch, extent.width, extent.height * extent.depth);
  if (e != cudaSuccess) return e;
  *p = make_cudaPitchedPtr(q, pitch, extent.width, extent.height);
  return cudaSuccess;
}
static inline cudaError_t cudaMemset3D(struct cudaPitchedPtr p, int value, struct cudaExtent extent) {
  if (extent.width > p.pitch) return polypy_rt_fail(cudaErrorInvalidValue);
  POLYPY_RT_HOOKED(polypy_rt_queues_legacy_wait, polypy_rt_legacy_wait());
  for (size_t z = 0; z < extent.depth; ++z)
    for (size_t y = 0; y < extent.height; ++y)
      memset((char*)p.ptr + (z * p.ysize + y) * p.pitch, value, extent.width);
  return cudaSuccess;
}
/* Between two pitched pointers: positions and the extent are in bytes (x) and rows (y, z). */
static inline cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms* p) {
  if (!p) return polypy_rt_fail(cudaErrorInvalidValue);
  if (p->srcArray || p->dstArray) return polypy_rt_memcpy3d_array(p);
  if (!p->srcPtr.ptr || !p->dstPtr.ptr) return polypy_rt_fail(cudaErrorInvalidValue);
  const struct cudaPitchedPtr s = p->srcPtr, d = p->dstPtr;
  if (p->srcPos.x + p->extent.width > s.pitch || p->dstPos.x + p->extent.width > d.pitch)
    return polypy_rt_fail(cudaErrorInvalidPitchValue);
  size_t s_rows = s.ysize ? s.ysize : 1, d_rows = d.ysize ? d.ysize : 1;
  for (size_t z = 0; z < p->extent.depth; ++z) {
    for (size_t y = 0; y < p->extent.height; ++y) {
      const char* from = (const char*)s.ptr + ((p->srcPos.z + z) * s_rows + p->srcPos.y + y) * s.pitch + p->srcPos.x;
      char* to = (char*)d.ptr + ((p->dstPos.z + z) * d_rows + p->dstPos.y + y) * d.pitch + p->dstPos.x;
      cudaError_t e = cudaMemcpy(to, from, p->extent.width, p->kind);
      if (e != cudaSuccess) return e;
    }
  }
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms* p, cudaStream_t s = 0) {
  if (!p) return polypy_rt_fail(cudaErrorInvalidValue);
  if ((int)p->kind < 0 || (int)p->kind > 4) return polypy_rt_fail(cudaErrorInvalidMemcpyDirection);
  if ((!p->srcArray && !p->srcPtr.ptr) || (!p->dstArray && !p->dstPtr.ptr)) return polypy_rt_fail(cudaErrorInvalidValue);
  if ((!p->srcArray && p->srcPos.x + p->extent.width > p->srcPtr.pitch) ||
      (!p->dstArray && p->dstPos.x + p->extent.width > p->dstPtr.pitch))
    return polypy_rt_fail(cudaErrorInvalidPitchValue);
  struct cudaMemcpy3DParms q = *p;  /* the parameters as they are at the call */
  POLYPY_RT_STREAM_WORK(s, cudaGraphNodeTypeMemcpy, cudaMemcpy3D(&q));
}
static inline cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr p, int value, struct cudaExtent extent,
                                            cudaStream_t s = 0) {
  if (extent.width > p.pitch) return polypy_rt_fail(cudaErrorInvalidValue);
  if (!p.ptr && extent.width && extent.height && extent.depth) return polypy_rt_fail(cudaErrorInvalidValue);
  POLYPY_RT_STREAM_WORK(s, cudaGraphNodeTypeMemset, cudaMemset3D(p, value, extent));
}
static inline cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                            size_t height, enum cudaMemcpyKind kind, cudaStream_t s = 0) {
  if (width > dpitch || width > spitch) return polypy_rt_fail(cudaErrorInvalidPitchValue);
  if ((int)kind < 0 || (int)kind > 4) return polypy_rt_fail(cudaErrorInvalidMemcpyDirection);
  if (polypy_rt_rows_span(spitch, width, height) && (!src || polypy_rt_past_block(src, polypy_rt_rows_span(spitch, width, height))))
    return polypy_rt_fail(cudaErrorInvalidValue);
  cudaError_t bad = polypy_rt_check_fill(dst, polypy_rt_rows_span(dpitch, width, height));
  if (bad != cudaSuccess) return bad;
  POLYPY_RT_STREAM_WORK(s, cudaGraphNodeTypeMemcpy, cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind));
}
static inline cudaError_t cudaMemset2DAsync(void* dst, size_t pitch, int value, size_t width, size_t height,
                                            cudaStream_t s = 0) {
  cudaError_t bad = polypy_rt_check_fill(dst, polypy_rt_rows_span(pitch, width, height));
  if (bad != cudaSuccess) return bad;
  POLYPY_RT_STREAM_WORK(s, cudaGraphNodeTypeMemset, cudaMemset2D(dst, pitch, value, width, height));
}

/* Peer copies on one device: both devices must be device 0, and the copy is a device-to-device one. */
static inline cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t count) {
  if (dst_device != 0 || src_device != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  return cudaMemcpy(dst, src, count, cudaMemcpyDeviceToDevice);
}
static inline cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t count,
                                              cudaStream_t s = 0) {
  if (dst_device != 0 || src_device != 0) return polypy_rt_fail(cudaErrorInvalidDevice);
  cudaError_t bad = polypy_rt_check_copy(dst, src, count, cudaMemcpyDeviceToDevice);
  if (bad != cudaSuccess) return bad;
  POLYPY_RT_STREAM_WORK(s, cudaGraphNodeTypeMemcpy, cudaMemcpyPeer(dst, dst_device, src, src_device, count));
}

/* What a pointer is: device memory (cudaMalloc's blocks, which include managed and pinned host
 * memory here: one registry, parts/memory.h) or plain host memory the runtime does not know. */
enum cudaMemoryType { cudaMemoryTypeUnregistered = 0, cudaMemoryTypeHost = 1, cudaMemoryTypeDevice = 2,
                      cudaMemoryTypeManaged = 3 };
struct cudaPointerAttributes { enum cudaMemoryType type; int device; void* devicePointer; void* hostPointer; };
static inline cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* a, const void* p) {
  if (!a) return polypy_rt_fail(cudaErrorInvalidValue);
  void* base = 0;
  size_t size = 0;
  if (polypy_rt_find_alloc(p, &base, &size)) {
    a->type = cudaMemoryTypeDevice;
    a->device = 0;
    a->devicePointer = a->hostPointer = (void*)p;  /* one address space: the host sees it too */
  } else {
    a->type = cudaMemoryTypeUnregistered;
    a->device = -2;
    a->devicePointer = a->hostPointer = 0;
  }
  return cudaSuccess;
}
static inline cudaError_t cudaHostGetFlags(unsigned int* flags, void* host) {
  void* base = 0;
  size_t size = 0;
  if (!flags) return polypy_rt_fail(cudaErrorInvalidValue);
  if (!polypy_rt_find_alloc(host, &base, &size)) return polypy_rt_fail(cudaErrorInvalidValue);
  *flags = cudaHostAllocMapped;  /* every block is mapped: the device pointer is the block */
  return cudaSuccess;
}

/* A __device__ or __constant__ variable is a host variable in a translated program. */
template <class T> static inline cudaError_t cudaGetSymbolAddress(void** p, const T& symbol) {
  if (!p) return polypy_rt_fail(cudaErrorInvalidValue);
  *p = (void*)&symbol;
  return cudaSuccess;
}
template <class T> static inline cudaError_t cudaGetSymbolSize(size_t* size, const T& symbol) {
  if (!size) return polypy_rt_fail(cudaErrorInvalidValue);
  *size = sizeof(T);
  return cudaSuccess;
}
