/* polypy runtime: texture references on linear memory; CUDA arrays and texture objects refused (part of cuda_runtime.h). */
/* Texture references bound to linear device memory. A kernel's tex1Dfetch(t, i) reads the bound
 * buffer; polypy passes `t`'s binding to the kernel as a hidden argument (a plain pointer). The
 * reference keeps what cudaBindTexture gave it. CUDA arrays, 2-D textures and texture objects are
 * refused (by the frontend in device code, by these declarations in host code). */
enum cudaTextureReadMode { cudaReadModeElementType = 0, cudaReadModeNormalizedFloat = 1 };
enum cudaTextureFilterMode { cudaFilterModePoint = 0, cudaFilterModeLinear = 1 };
enum cudaTextureAddressMode { cudaAddressModeWrap = 0, cudaAddressModeClamp = 1, cudaAddressModeMirror = 2,
                              cudaAddressModeBorder = 3 };
enum cudaChannelFormatKind { cudaChannelFormatKindSigned = 0, cudaChannelFormatKindUnsigned = 1,
                             cudaChannelFormatKindFloat = 2, cudaChannelFormatKindNone = 3 };
struct cudaChannelFormatDesc { int x, y, z, w; enum cudaChannelFormatKind f; };
template <class T> static inline cudaChannelFormatDesc cudaCreateChannelDesc(void) {
  cudaChannelFormatDesc d = {(int)(8 * sizeof(T)), 0, 0, 0, cudaChannelFormatKindFloat};
  return d;
}
static inline cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f) {
  cudaChannelFormatDesc d = {x, y, z, w, f};
  return d;
}
struct textureReference {
  int normalized;
  enum cudaTextureFilterMode filterMode;
  enum cudaTextureAddressMode addressMode[3];
  struct cudaChannelFormatDesc channelDesc;
  const void* polypy_ptr; /* the bound device memory */
};
template <class T, int dim = 1, enum cudaTextureReadMode mode = cudaReadModeElementType>
struct texture : textureReference {
  texture() { normalized = 0; filterMode = cudaFilterModePoint; polypy_ptr = 0; }
};
static inline cudaError_t cudaBindTexture(size_t* offset, const struct textureReference* tex, const void* devPtr,
                                          const struct cudaChannelFormatDesc* desc, size_t size = ~(size_t)0) {
  (void)desc; (void)size;
  if (offset) *offset = 0;
  ((struct textureReference*)tex)->polypy_ptr = devPtr;
  return cudaSuccess;
}
template <class T, int dim, enum cudaTextureReadMode mode>
static inline cudaError_t cudaBindTexture(size_t* offset, const texture<T, dim, mode>& tex, const void* devPtr,
                                          size_t size = ~(size_t)0) {
  return cudaBindTexture(offset, &tex, devPtr, &tex.channelDesc, size);
}
template <class T, int dim, enum cudaTextureReadMode mode>
static inline cudaError_t cudaBindTexture(size_t* offset, const texture<T, dim, mode>& tex, const void* devPtr,
                                          const struct cudaChannelFormatDesc& desc, size_t size = ~(size_t)0) {
  return cudaBindTexture(offset, &tex, devPtr, &desc, size);
}
static inline cudaError_t cudaUnbindTexture(const struct textureReference* tex) {
  ((struct textureReference*)tex)->polypy_ptr = 0;
  return cudaSuccess;
}
template <class T, int dim, enum cudaTextureReadMode mode>
static inline cudaError_t cudaUnbindTexture(const texture<T, dim, mode>& tex) { return cudaUnbindTexture(&tex); }
#define POLYPY_TEXTURE_REFUSED(what) __attribute__((unavailable(what " are not supported by polypy")))
typedef unsigned long long cudaTextureObject_t;
cudaError_t cudaBindTexture2D(...) POLYPY_TEXTURE_REFUSED("2-D textures (cudaBindTexture2D)");
cudaError_t cudaBindTextureToArray(...) POLYPY_TEXTURE_REFUSED("textures bound to CUDA arrays");
cudaError_t cudaMallocArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMallocArray)");
cudaError_t cudaMalloc3DArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMalloc3DArray)");
cudaError_t cudaMemcpyToArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMemcpyToArray)");
cudaError_t cudaMemcpy2DToArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMemcpy2DToArray)");
cudaError_t cudaMemcpyFromArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMemcpyFromArray)");
cudaError_t cudaMemcpy2DFromArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMemcpy2DFromArray)");
cudaError_t cudaMemcpyArrayToArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaMemcpyArrayToArray)");
cudaError_t cudaFreeArray(...) POLYPY_TEXTURE_REFUSED("CUDA arrays (cudaFreeArray)");
cudaError_t cudaCreateTextureObject(...) POLYPY_TEXTURE_REFUSED("texture objects (cudaCreateTextureObject)");
cudaError_t cudaDestroyTextureObject(...) POLYPY_TEXTURE_REFUSED("texture objects (cudaDestroyTextureObject)");

