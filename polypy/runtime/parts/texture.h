/* polypy runtime: CUDA arrays, texture and surface objects, texture references (part of cuda_runtime.h).
 *
 * A CUDA array is a dense block of texels (x fastest, then y, then z / layer / cube face) with a
 * channel format of 1, 2 or 4 channels of one size (8, 16 or 32 bits; signed, unsigned or 32-bit
 * float). A texture or surface object is a 64-bit handle: an index into a table of descriptors
 * (struct polypy_tex), made by cudaCreateTextureObject / cudaCreateSurfaceObject. Kernels receive
 * the handle as the plain integer it is and fetch through polypy_tex_<type>() /
 * polypy_surf_read_<type>() / polypy_surf_write_<type>() below, which implement the CUDA
 * Programming Guide's "Texture Fetching" formulas: nearest-point and linear filtering with weights
 * in 1.8 fixed point, normalized coordinates, wrap / clamp / mirror / border addressing, and the
 * normalized-float read mode of 8- and 16-bit integer channels (docs/textures.md).
 *
 * What this runtime does not implement is refused where it is asked for: at compile time by name
 * (mipmapped arrays, parts/refused.h), or when the program runs, by cudaCreateTextureObject and
 * friends printing "polypy: ... is not supported" and exiting with status 1 (a descriptor combination
 * the formulas here do not cover, such as sRGB or 16-bit float channels). */
enum cudaTextureReadMode { cudaReadModeElementType = 0, cudaReadModeNormalizedFloat = 1 };
enum cudaTextureFilterMode { cudaFilterModePoint = 0, cudaFilterModeLinear = 1 };
enum cudaTextureAddressMode { cudaAddressModeWrap = 0, cudaAddressModeClamp = 1, cudaAddressModeMirror = 2,
                              cudaAddressModeBorder = 3 };
enum cudaChannelFormatKind { cudaChannelFormatKindSigned = 0, cudaChannelFormatKindUnsigned = 1,
                             cudaChannelFormatKindFloat = 2, cudaChannelFormatKindNone = 3 };
enum cudaSurfaceBoundaryMode { cudaBoundaryModeZero = 0, cudaBoundaryModeClamp = 1, cudaBoundaryModeTrap = 2 };
enum cudaSurfaceFormatMode { cudaFormatModeForced = 0, cudaFormatModeAuto = 1 };
enum cudaTextureType { cudaTextureType1D = 0x01, cudaTextureType2D = 0x02, cudaTextureType3D = 0x03,
                       cudaTextureTypeCubemap = 0x0C, cudaTextureType1DLayered = 0xF1,
                       cudaTextureType2DLayered = 0xF2, cudaTextureTypeCubemapLayered = 0xFC };
struct cudaChannelFormatDesc { int x, y, z, w; enum cudaChannelFormatKind f; };
typedef unsigned long long cudaTextureObject_t;
typedef unsigned long long cudaSurfaceObject_t;
struct cudaMipmappedArray;
typedef struct cudaMipmappedArray* cudaMipmappedArray_t;
#define cudaArrayDefault 0x00
#define cudaArrayLayered 0x01
#define cudaArraySurfaceLoadStore 0x02
#define cudaArrayCubemap 0x04
#define cudaArrayTextureGather 0x08
enum cudaResourceType { cudaResourceTypeArray = 0, cudaResourceTypeMipmappedArray = 1, cudaResourceTypeLinear = 2,
                        cudaResourceTypePitch2D = 3 };
struct cudaResourceDesc {
  enum cudaResourceType resType;
  union {
    struct { cudaArray_t array; } array;
    struct { cudaMipmappedArray_t mipmap; } mipmap;
    struct { void* devPtr; struct cudaChannelFormatDesc desc; size_t sizeInBytes; } linear;
    struct { void* devPtr; struct cudaChannelFormatDesc desc; size_t width, height, pitchInBytes; } pitch2D;
  } res;
};
struct cudaTextureDesc {
  enum cudaTextureAddressMode addressMode[3];
  enum cudaTextureFilterMode filterMode;
  enum cudaTextureReadMode readMode;
  int sRGB;
  float borderColor[4];
  int normalizedCoords;
  unsigned int maxAnisotropy;
  enum cudaTextureFilterMode mipmapFilterMode;
  float mipmapLevelBias, minMipmapLevelClamp, maxMipmapLevelClamp;
  int disableTrilinearOptimization, seamlessCubemap;
};
struct cudaResourceViewDesc { int format; size_t width, height, depth; unsigned int firstMipmapLevel, lastMipmapLevel,
                              firstLayer, lastLayer; };

/* ------------------------------------------------------------------ channel descriptors */
static inline cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f) {
  cudaChannelFormatDesc d = {x, y, z, w, f};
  return d;
}
/* The element types CUDA defines a descriptor for; any other type has the empty descriptor
 * (cudaChannelFormatKindNone), which arrays and textures refuse when the program runs. */
template <class T> struct polypy_channel {
  static cudaChannelFormatDesc desc() { return cudaCreateChannelDesc(0, 0, 0, 0, cudaChannelFormatKindNone); }
};
#define POLYPY_CHANNEL(T, bits, n, kind)                                                                   \
  template <> struct polypy_channel<T> {                                                                \
    static cudaChannelFormatDesc desc() {                                                               \
      return cudaCreateChannelDesc(bits, (n) > 1 ? bits : 0, (n) > 2 ? bits : 0, (n) > 3 ? bits : 0, kind); \
    }                                                                                                   \
  };
#define POLYPY_CHANNELS(S, V, bits, kind) \
  POLYPY_CHANNEL(S, bits, 1, kind) POLYPY_CHANNEL(V##1, bits, 1, kind) POLYPY_CHANNEL(V##2, bits, 2, kind) \
  POLYPY_CHANNEL(V##4, bits, 4, kind)
POLYPY_CHANNELS(float, float, 32, cudaChannelFormatKindFloat)
POLYPY_CHANNELS(int, int, 32, cudaChannelFormatKindSigned)
POLYPY_CHANNELS(unsigned int, uint, 32, cudaChannelFormatKindUnsigned)
POLYPY_CHANNELS(short, short, 16, cudaChannelFormatKindSigned)
POLYPY_CHANNELS(unsigned short, ushort, 16, cudaChannelFormatKindUnsigned)
POLYPY_CHANNELS(signed char, char, 8, cudaChannelFormatKindSigned)
POLYPY_CHANNELS(unsigned char, uchar, 8, cudaChannelFormatKindUnsigned)
POLYPY_CHANNEL(char, 8, 1, cudaChannelFormatKindSigned) /* CUDA: char is signed here */
#undef POLYPY_CHANNELS
#undef POLYPY_CHANNEL
template <class T> static inline cudaChannelFormatDesc cudaCreateChannelDesc(void) { return polypy_channel<T>::desc(); }

/* ------------------------------------------------------------------ CUDA arrays */
struct cudaArray {
  struct cudaChannelFormatDesc desc;
  size_t width, height, depth; /* as allocated: height and depth 0 for fewer dimensions */
  unsigned int flags;
  size_t elem;                 /* bytes per texel */
  unsigned char* data;         /* width * max(height, 1) * max(depth, 1) texels */
};
static inline void polypy_tex_refuse(const char* what) {
  fflush(stdout);
  fprintf(stderr, "polypy: %s is not supported\n", what);
  exit(1);
}
/* Bytes per texel of a channel format, or 0 where polypy does not implement it. */
static inline size_t polypy_rt_format_bytes(const struct cudaChannelFormatDesc* d) {
  int bits = d->x, n = 1;
  if (d->y) { if (d->y != bits) return 0; n = 2; }
  if (d->z) { if (d->z != bits || !d->w) return 0; n = 3; }
  if (d->w) { if (d->w != bits || n != 3) return 0; n = 4; }
  if (!(bits == 8 || bits == 16 || bits == 32)) return 0;
  if (d->f == cudaChannelFormatKindFloat && bits != 32) return 0;
  if (d->f != cudaChannelFormatKindFloat && d->f != cudaChannelFormatKindSigned &&
      d->f != cudaChannelFormatKindUnsigned) return 0;
  return (size_t)(bits / 8 * n);
}
static inline cudaError_t cudaMalloc3DArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc,
                                            struct cudaExtent extent, unsigned int flags = 0) {
  if (!array || !desc || !extent.width) return polypy_rt_fail(cudaErrorInvalidValue);
  if (flags & ~(unsigned)(cudaArrayLayered | cudaArraySurfaceLoadStore | cudaArrayCubemap | cudaArrayTextureGather))
    return polypy_rt_fail(cudaErrorInvalidValue);
  if ((flags & cudaArrayCubemap) &&
      (extent.width != extent.height || !extent.depth || extent.depth % 6 || (!(flags & cudaArrayLayered) && extent.depth != 6)))
    return polypy_rt_fail(cudaErrorInvalidValue);
  if ((flags & cudaArrayLayered) && !extent.depth) return polypy_rt_fail(cudaErrorInvalidValue);
  size_t elem = polypy_rt_format_bytes(desc);
  if (!elem) polypy_tex_refuse("this channel format of a CUDA array (only 1, 2 or 4 channels of 8, 16 or 32 bits, "
                               "32-bit for float)");
  size_t texels = extent.width * (extent.height ? extent.height : 1) * (extent.depth ? extent.depth : 1);
  struct cudaArray* a = (struct cudaArray*)calloc(1, sizeof(struct cudaArray));
  void* data = 0;
  cudaError_t e = cudaMalloc(&data, texels * elem);
  if (!a || e != cudaSuccess) { free(a); return polypy_rt_fail(cudaErrorMemoryAllocation); }
  memset(data, 0, texels * elem);
  a->desc = *desc; a->width = extent.width; a->height = extent.height; a->depth = extent.depth;
  a->flags = flags; a->elem = elem; a->data = (unsigned char*)data;
  *array = a;
  return cudaSuccess;
}
static inline cudaError_t cudaMallocArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc, size_t width,
                                          size_t height = 0, unsigned int flags = 0) {
  if (flags & (cudaArrayLayered | cudaArrayCubemap)) return polypy_rt_fail(cudaErrorInvalidValue);
  return cudaMalloc3DArray(array, desc, make_cudaExtent(width, height, 0), flags);
}
static inline cudaError_t cudaFreeArray(cudaArray_t array) {
  if (!array) return cudaSuccess;
  cudaFree(array->data);
  free(array);
  return cudaSuccess;
}
static inline cudaError_t cudaGetChannelDesc(struct cudaChannelFormatDesc* desc, cudaArray_const_t array) {
  if (!desc || !array) return polypy_rt_fail(cudaErrorInvalidValue);
  *desc = array->desc;
  return cudaSuccess;
}
static inline cudaError_t cudaArrayGetInfo(struct cudaChannelFormatDesc* desc, struct cudaExtent* extent,
                                           unsigned int* flags, cudaArray_t array) {
  if (!array) return polypy_rt_fail(cudaErrorInvalidValue);
  if (desc) *desc = array->desc;
  if (extent) *extent = make_cudaExtent(array->width, array->height, array->depth);
  if (flags) *flags = array->flags;
  return cudaSuccess;
}
static inline size_t polypy_rt_array_row_bytes(cudaArray_const_t a) { return a->width * a->elem; }
static inline size_t polypy_rt_array_rows(cudaArray_const_t a) {
  return (a->height ? a->height : 1) * (a->depth ? a->depth : 1);
}
/* Rows of `width` bytes from byte (wOffset, row hOffset) of the array, pitch `pitch` on the other
 * side; to the array when `to` is set. */
static inline cudaError_t polypy_rt_array_rows_copy(cudaArray_const_t a, size_t wOffset, size_t hOffset, void* other,
                                                    size_t pitch, size_t width, size_t height, int to) {
  if (!a || (!other && width && height)) return polypy_rt_fail(cudaErrorInvalidValue);
  size_t row = polypy_rt_array_row_bytes(a);
  if (wOffset + width > row || hOffset + height > polypy_rt_array_rows(a) || (height > 1 && pitch < width))
    return polypy_rt_fail(cudaErrorInvalidValue);
  for (size_t y = 0; y < height; ++y) {
    unsigned char* in_array = a->data + (hOffset + y) * row + wOffset;
    unsigned char* there = (unsigned char*)other + y * pitch;
    if (to) memcpy(in_array, there, width); else memcpy(there, in_array, width);
  }
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                              size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind) {
  (void)kind;
  return polypy_rt_array_rows_copy(dst, wOffset, hOffset, (void*)src, spitch, width, height, 1);
}
static inline cudaError_t cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                                size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind) {
  (void)kind;
  return polypy_rt_array_rows_copy(src, wOffset, hOffset, dst, dpitch, width, height, 0);
}
/* count bytes from byte wOffset of row hOffset on, through the rows that follow (as CUDA does). */
static inline cudaError_t polypy_rt_array_linear_copy(cudaArray_const_t a, size_t wOffset, size_t hOffset, void* other,
                                                      size_t count, int to) {
  if (!a || (!other && count)) return polypy_rt_fail(cudaErrorInvalidValue);
  size_t start = hOffset * polypy_rt_array_row_bytes(a) + wOffset;
  if (wOffset > polypy_rt_array_row_bytes(a) || start + count > polypy_rt_array_rows(a) * polypy_rt_array_row_bytes(a))
    return polypy_rt_fail(cudaErrorInvalidValue);
  if (to) memcpy(a->data + start, other, count); else memcpy(other, a->data + start, count);
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                            size_t count, enum cudaMemcpyKind kind) {
  (void)kind;
  return polypy_rt_array_linear_copy(dst, wOffset, hOffset, (void*)src, count, 1);
}
static inline cudaError_t cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                              size_t count, enum cudaMemcpyKind kind) {
  (void)kind;
  return polypy_rt_array_linear_copy(src, wOffset, hOffset, dst, count, 0);
}
/* cudaMemcpy3D where a side is an array (parts/memory_nd.h hands these here): the extent and an
 * array's position in texels, a pitched pointer's x position in bytes. */
static inline cudaError_t polypy_rt_memcpy3d_array(const struct cudaMemcpy3DParms* p) {
  cudaArray_const_t a = p->srcArray ? p->srcArray : p->dstArray;
  if (p->srcArray && p->dstArray) {
    if (p->srcArray->elem != p->dstArray->elem) return polypy_rt_fail(cudaErrorInvalidValue);
  } else if (!(p->srcArray ? p->dstPtr.ptr : p->srcPtr.ptr)) {
    return polypy_rt_fail(cudaErrorInvalidValue);
  }
  size_t elem = a->elem, width = p->extent.width * elem;
  size_t h = p->extent.height ? p->extent.height : 1, d = p->extent.depth ? p->extent.depth : 1;
  for (size_t z = 0; z < d; ++z)
    for (size_t y = 0; y < h; ++y) {
      const unsigned char* from;
      unsigned char* to;
      const struct cudaArray* arrays[2] = {p->srcArray, p->dstArray};
      const struct cudaPos pos[2] = {p->srcPos, p->dstPos};
      const struct cudaPitchedPtr ptrs[2] = {p->srcPtr, p->dstPtr};
      unsigned char* at[2];
      for (int side = 0; side < 2; ++side) {
        const struct cudaArray* s = arrays[side];
        if (s) {
          size_t sh = s->height ? s->height : 1, sd = s->depth ? s->depth : 1;
          if (pos[side].x + p->extent.width > s->width || pos[side].y + h > sh || pos[side].z + d > sd)
            return polypy_rt_fail(cudaErrorInvalidValue);
          at[side] = s->data + (((pos[side].z + z) * sh + pos[side].y + y) * s->width + pos[side].x) * elem;
        } else {
          const struct cudaPitchedPtr q = ptrs[side];
          if (pos[side].x + width > q.pitch) return polypy_rt_fail(cudaErrorInvalidPitchValue);
          size_t rows = q.ysize ? q.ysize : h;
          at[side] = (unsigned char*)q.ptr + ((pos[side].z + z) * rows + pos[side].y + y) * q.pitch + pos[side].x;
        }
      }
      from = at[0];
      to = at[1];
      memmove(to, from, width);
    }
  return cudaSuccess;
}

#include "texture_fetch.h"
