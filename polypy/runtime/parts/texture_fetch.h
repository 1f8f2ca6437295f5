/* polypy runtime: texture and surface objects and what kernels fetch through them (part of
 * cuda_runtime.h, after parts/texture.h).
 *
 * Formulas (CUDA Programming Guide, "Texture Fetching"), per dimension of N texels:
 *   normalized coordinates: wrap x -> frac(x), mirror x -> frac(x) or 1 - frac(x) (floor(x) even /
 *   odd), then x -> x * N; nearest point: T[floor(x)]; linear: x_B = x - 0.5, i = floor(x_B),
 *   a = frac(x_B) rounded to 1.8 fixed point (a multiple of 1/256), (1 - a) T[i] + a T[i + 1] (and
 *   the bilinear / trilinear products in 2-D / 3-D). A texel index outside [0, N) is clamped
 *   (clamp), wrapped (wrap), reflected (mirror) or reads the border colour (border). */
struct polypy_tex {
  int used, surface;
  const unsigned char* data;
  size_t pitch;       /* bytes from one row to the next */
  int w, h, d;        /* texels per row, rows per slice, slices (layers, faces): 1 where absent */
  int dims;           /* 1, 2 or 3: the dimensions that filtering and addressing apply to */
  int layered, cubemap, linear_resource;
  int nch, cbits, ckind; /* channels, bits per channel, enum cudaChannelFormatKind */
  int filter, normalized_coords, normalized_read;
  int addr[3];
  float border[4];
  struct cudaResourceDesc res; /* as created */
};
#define POLYPY_TEX_MAX 4096
POLYPY_RT_STATE struct polypy_tex* polypy_tex_table(void) { static struct polypy_tex t[POLYPY_TEX_MAX]; return t; }
static inline const struct polypy_tex* polypy_tex_get(unsigned long long h, int surface) {
  if (h == 0 || h >= POLYPY_TEX_MAX || !polypy_tex_table()[h].used || polypy_tex_table()[h].surface != surface)
    polypy_tex_refuse(surface ? "a surface object that was not created (or destroyed): this read or write"
                              : "a texture object that was not created (or destroyed): this fetch");
  return &polypy_tex_table()[h];
}
static inline unsigned long long polypy_tex_new(void) {
  for (unsigned long long h = 1; h < POLYPY_TEX_MAX; ++h)
    if (!polypy_tex_table()[h].used) return h;
  polypy_tex_refuse("more than 4095 texture and surface objects at once");
  return 0;
}
/* The descriptor of a resource (without its sampling state); 0 when CUDA would reject it. */
static inline int polypy_tex_resource(struct polypy_tex* t, const struct cudaResourceDesc* r) {
  const struct cudaChannelFormatDesc* f = 0;
  t->res = *r;
  if (r->resType == cudaResourceTypeArray) {
    cudaArray_const_t a = r->res.array.array;
    if (!a) return 0;
    f = &a->desc;
    t->data = a->data; t->pitch = a->width * a->elem;
    t->w = (int)a->width; t->h = a->height ? (int)a->height : 1; t->d = a->depth ? (int)a->depth : 1;
    t->layered = (a->flags & cudaArrayLayered) != 0; t->cubemap = (a->flags & cudaArrayCubemap) != 0;
    t->dims = a->height ? (a->depth && !t->layered && !t->cubemap ? 3 : 2) : 1;
    if (t->layered && !a->height) { t->h = 1; } /* 1-D layered: slices of one row */
  } else if (r->resType == cudaResourceTypeLinear) {
    f = &r->res.linear.desc;
    size_t elem = polypy_rt_format_bytes(f);
    if (!r->res.linear.devPtr || !elem) return 0;
    t->data = (const unsigned char*)r->res.linear.devPtr; t->pitch = r->res.linear.sizeInBytes;
    t->w = (int)(r->res.linear.sizeInBytes / elem); t->h = t->d = 1; t->dims = 1; t->linear_resource = 1;
  } else if (r->resType == cudaResourceTypePitch2D) {
    f = &r->res.pitch2D.desc;
    if (!r->res.pitch2D.devPtr || !polypy_rt_format_bytes(f) ||
        r->res.pitch2D.pitchInBytes < r->res.pitch2D.width * polypy_rt_format_bytes(f)) return 0;
    t->data = (const unsigned char*)r->res.pitch2D.devPtr; t->pitch = r->res.pitch2D.pitchInBytes;
    t->w = (int)r->res.pitch2D.width; t->h = (int)r->res.pitch2D.height; t->d = 1; t->dims = 2;
  } else {
    polypy_tex_refuse("a texture over a mipmapped array");
  }
  if (!polypy_rt_format_bytes(f)) polypy_tex_refuse("this channel format of a texture");
  t->cbits = f->x; t->ckind = f->f;
  t->nch = f->w ? 4 : f->z ? 3 : f->y ? 2 : 1;
  return 1;
}
static inline cudaError_t cudaCreateTextureObject(cudaTextureObject_t* obj, const struct cudaResourceDesc* r,
                                                  const struct cudaTextureDesc* td,
                                                  const struct cudaResourceViewDesc* view) {
  if (!obj || !r || !td) return polypy_rt_fail(cudaErrorInvalidValue);
  if (view) polypy_tex_refuse("a resource view of a texture object");
  if (td->sRGB) polypy_tex_refuse("sRGB texture reads");
  struct polypy_tex t;
  memset(&t, 0, sizeof t);
  if (!polypy_tex_resource(&t, r)) return polypy_rt_fail(cudaErrorInvalidValue);
  t.filter = td->filterMode; t.normalized_coords = td->normalizedCoords != 0;
  t.normalized_read = td->readMode == cudaReadModeNormalizedFloat && t.ckind != cudaChannelFormatKindFloat &&
                      t.cbits < 32;
  for (int k = 0; k < 3; ++k) t.addr[k] = td->addressMode[k];
  for (int k = 0; k < 4; ++k) t.border[k] = td->borderColor[k];
  if (td->filterMode != cudaFilterModePoint && td->filterMode != cudaFilterModeLinear)
    return polypy_rt_fail(cudaErrorInvalidValue);
  /* Linear filtering needs a floating-point result (CUDA rejects it otherwise). */
  if (t.filter == cudaFilterModeLinear && t.ckind != cudaChannelFormatKindFloat && !t.normalized_read)
    return polypy_rt_fail(cudaErrorInvalidValue);
  if (t.linear_resource && (t.filter != cudaFilterModePoint || t.normalized_coords))
    return polypy_rt_fail(cudaErrorInvalidValue);
  for (int k = 0; k < t.dims; ++k) {
    if (t.addr[k] < cudaAddressModeWrap || t.addr[k] > cudaAddressModeBorder) return polypy_rt_fail(cudaErrorInvalidValue);
  }
  /* CUDA's runtime: with unnormalized coordinates, wrap and mirror are not supported and are switched
   * to clamp (cudaCreateTextureObject's documentation). */
  if (!t.normalized_coords && !t.cubemap)
    for (int k = 0; k < 3; ++k)
      if (t.addr[k] == cudaAddressModeWrap || t.addr[k] == cudaAddressModeMirror) t.addr[k] = cudaAddressModeClamp;
  if (t.cubemap && td->seamlessCubemap) polypy_tex_refuse("seamless cubemap filtering");
  if (td->maxAnisotropy > 1) polypy_tex_refuse("anisotropic texture filtering");
  unsigned long long h = polypy_tex_new();
  t.used = 1;
  polypy_tex_table()[h] = t;
  *obj = h;
  return cudaSuccess;
}
static inline cudaError_t cudaDestroyTextureObject(cudaTextureObject_t obj) {
  if (obj == 0 || obj >= POLYPY_TEX_MAX || !polypy_tex_table()[obj].used || polypy_tex_table()[obj].surface)
    return polypy_rt_fail(cudaErrorInvalidValue);
  polypy_tex_table()[obj].used = 0;
  return cudaSuccess;
}
static inline cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc* r, cudaTextureObject_t obj) {
  if (!r || obj == 0 || obj >= POLYPY_TEX_MAX || !polypy_tex_table()[obj].used || polypy_tex_table()[obj].surface)
    return polypy_rt_fail(cudaErrorInvalidValue);
  *r = polypy_tex_table()[obj].res;
  return cudaSuccess;
}
static inline cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t* obj, const struct cudaResourceDesc* r) {
  if (!obj || !r || r->resType != cudaResourceTypeArray || !r->res.array.array)
    return polypy_rt_fail(cudaErrorInvalidValue);
  if (!(r->res.array.array->flags & cudaArraySurfaceLoadStore)) return polypy_rt_fail(cudaErrorInvalidValue);
  struct polypy_tex t;
  memset(&t, 0, sizeof t);
  if (!polypy_tex_resource(&t, r)) return polypy_rt_fail(cudaErrorInvalidValue);
  unsigned long long h = polypy_tex_new();
  t.used = 1; t.surface = 1;
  polypy_tex_table()[h] = t;
  *obj = h;
  return cudaSuccess;
}
static inline cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t obj) {
  if (obj == 0 || obj >= POLYPY_TEX_MAX || !polypy_tex_table()[obj].used || !polypy_tex_table()[obj].surface)
    return polypy_rt_fail(cudaErrorInvalidValue);
  polypy_tex_table()[obj].used = 0;
  return cudaSuccess;
}

/* ------------------------------------------------------------------ fetching (called by kernels) */
/* Component c of texel (x, y, z) (indices already in range), as the read mode returns it. */
static inline double polypy_tex_texel(const struct polypy_tex* t, int x, int y, int z, int c) {
  if (c >= t->nch) polypy_tex_refuse("a texture fetch of more components than the texture's format has");
  const unsigned char* p = t->data + ((size_t)z * (size_t)t->h + (size_t)y) * t->pitch +
                           (size_t)x * (size_t)(t->nch * t->cbits / 8) + (size_t)(c * t->cbits / 8);
  double v;
  switch (t->cbits * 4 + t->ckind) {
    case 8 * 4 + cudaChannelFormatKindSigned: v = *(const signed char*)p; break;
    case 8 * 4 + cudaChannelFormatKindUnsigned: v = *(const unsigned char*)p; break;
    case 16 * 4 + cudaChannelFormatKindSigned: v = *(const short*)p; break;
    case 16 * 4 + cudaChannelFormatKindUnsigned: v = *(const unsigned short*)p; break;
    case 32 * 4 + cudaChannelFormatKindSigned: v = *(const int*)p; break;
    case 32 * 4 + cudaChannelFormatKindUnsigned: v = *(const unsigned int*)p; break;
    default: v = *(const float*)p; break;
  }
  if (t->normalized_read) {
    /* Unsigned: v / (2^b - 1); signed: v / (2^(b-1) - 1), at least -1. */
    double scale = t->ckind == cudaChannelFormatKindUnsigned ? (double)((1 << t->cbits) - 1)
                                                              : (double)((1 << (t->cbits - 1)) - 1);
    float f = (float)v / (float)scale;
    v = f < -1.0f ? -1.0f : f;
  }
  return v;
}
/* Index i of n texels under addressing mode m; -1 reads the border colour. */
static inline int polypy_tex_index(int i, int n, int m) {
  if (i >= 0 && i < n) return i;
  switch (m) {
    case cudaAddressModeBorder: return -1;
    case cudaAddressModeWrap: return ((i % n) + n) % n;
    case cudaAddressModeMirror: {
      int p = ((i % (2 * n)) + 2 * n) % (2 * n);
      return p < n ? p : 2 * n - 1 - p;
    }
    default: return i < 0 ? 0 : n - 1;
  }
}
/* The texel coordinate of x along a dimension of n texels (normalized coordinates scaled by n,
 * after wrap or mirror folded them into [0, 1)). */
static inline float polypy_tex_coord(float x, int n, int m, int normalized) {
  if (!normalized) return x;
  if (m == cudaAddressModeWrap) x = x - floorf(x);
  else if (m == cudaAddressModeMirror) {
    float f = floorf(x);
    x = ((long long)f % 2 == 0) ? x - f : 1.0f - (x - f);
  }
  return x * (float)n;
}
/* Wrap and mirror addressing are defined for normalized coordinates only: with unnormalized ones,
 * a texel outside the texture that contributes to a fetch is refused (inside, every mode agrees). */
static inline void polypy_tex_check_outside(const struct polypy_tex* t, const int* i, const int* modes) {
  const int n[3] = {t->w, t->h, t->d};
  for (int k = 0; k < t->dims; ++k)
    if ((i[k] < 0 || i[k] >= n[k]) && !t->normalized_coords && !t->cubemap &&
        (modes[k] == cudaAddressModeWrap || modes[k] == cudaAddressModeMirror))
      polypy_tex_refuse("wrap or mirror addressing with unnormalized texture coordinates (a fetch outside the texture)");
}
static inline double polypy_tex_at(const struct polypy_tex* t, const int* i, int slice, int c, const int* modes) {
  int x = polypy_tex_index(i[0], t->w, modes[0]), y = 0, z = slice;
  if (x < 0) return t->border[c];
  if (t->dims >= 2) { y = polypy_tex_index(i[1], t->h, modes[1]); if (y < 0) return t->border[c]; }
  if (t->dims == 3) { z = polypy_tex_index(i[2], t->d, modes[2]); if (z < 0) return t->border[c]; }
  return polypy_tex_texel(t, x, y, z, c);
}
/* Filtered component c at texel coordinates u[0..dims) of slice `slice`. */
static inline double polypy_tex_sample(const struct polypy_tex* t, const float* coords, int slice, int c,
                                       const int* modes) {
  int dims = t->dims;
  int i[3] = {0, 0, 0};
  /* Far outside is outside: coordinates beyond 2^30 texels are clamped there, so that the texel
   * indices stay ints (every addressing mode treats them as it treats any index outside). */
  float u[3] = {0, 0, 0};
  for (int k = 0; k < dims; ++k) {
    if (coords[k] != coords[k]) polypy_tex_refuse("a NaN texture coordinate (or an infinite one with wrap or mirror)");
    u[k] = fminf(fmaxf(coords[k], -1073741824.0f), 1073741824.0f);
  }
  if (t->filter == cudaFilterModePoint) {
    for (int k = 0; k < dims; ++k) i[k] = (int)floorf(u[k]);
    polypy_tex_check_outside(t, i, modes);
    return polypy_tex_at(t, i, slice, c, modes);
  }
  float a[3] = {0, 0, 0};
  for (int k = 0; k < dims; ++k) {
    float b = u[k] - 0.5f, f = floorf(b);
    i[k] = (int)f;
    a[k] = rintf((b - f) * 256.0f) / 256.0f; /* 1.8 fixed point */
  }
  float sum = 0.0f;
  for (int corner = 0; corner < (1 << dims); ++corner) {
    int j[3] = {i[0], i[1], i[2]};
    float wgt = 1.0f;
    for (int k = 0; k < dims; ++k) {
      int up = (corner >> k) & 1;
      j[k] += up;
      wgt *= up ? a[k] : 1.0f - a[k];
    }
    if (wgt != 0.0f) polypy_tex_check_outside(t, j, modes);
    sum += wgt * (float)polypy_tex_at(t, j, slice, c, modes);
  }
  return sum;
}
/* The face and face coordinates (normalized) of a cubemap direction (CUDA's cubemap table). */
static inline int polypy_tex_face(float x, float y, float z, float* s, float* tt) {
  float ax = fabsf(x), ay = fabsf(y), az = fabsf(z), m, sc, tc;
  int face;
  if (ax >= ay && ax >= az) { m = ax; face = x >= 0 ? 0 : 1; sc = x >= 0 ? -z : z; tc = -y; }
  else if (ay >= az) { m = ay; face = y >= 0 ? 2 : 3; sc = x; tc = y >= 0 ? z : -z; }
  else { m = az; face = z >= 0 ? 4 : 5; sc = z >= 0 ? x : -x; tc = -y; }
  *s = (sc / m + 1.0f) * 0.5f;
  *tt = (tc / m + 1.0f) * 0.5f;
  return face;
}
/* What a kernel's texN*<T>(obj, ...) fetches, component c, for each op (docs/textures.md). */
enum { POLYPY_TEX_FETCH = 0, POLYPY_TEX_1D = 1, POLYPY_TEX_2D = 2, POLYPY_TEX_3D = 3, POLYPY_TEX_1D_LAYERED = 4,
       POLYPY_TEX_2D_LAYERED = 5, POLYPY_TEX_CUBE = 6, POLYPY_TEX_CUBE_LAYERED = 7 };
static inline double polypy_tex_value(unsigned long long h, int op, int ix, float x, float y, float z, int layer,
                                      int c) {
  const struct polypy_tex* t = polypy_tex_get(h, 0);
  static const char* const names[] = {"tex1Dfetch", "tex1D", "tex2D", "tex3D", "tex1DLayered", "tex2DLayered",
                                      "texCubemap", "texCubemapLayered"};
  int want = op == POLYPY_TEX_FETCH || op == POLYPY_TEX_1D || op == POLYPY_TEX_1D_LAYERED ? 1
           : op == POLYPY_TEX_3D ? 3 : 2;
  int layered = op == POLYPY_TEX_1D_LAYERED || op == POLYPY_TEX_2D_LAYERED || op == POLYPY_TEX_CUBE_LAYERED;
  int cube = op == POLYPY_TEX_CUBE || op == POLYPY_TEX_CUBE_LAYERED;
  if ((op == POLYPY_TEX_FETCH) != t->linear_resource || t->dims != want || t->layered != layered ||
      t->cubemap != cube) {
    char what[160];
    snprintf(what, sizeof what, "%s of a texture object whose resource has another shape (an undefined fetch)",
             names[op]);
    polypy_tex_refuse(what);
  }
  if (op == POLYPY_TEX_FETCH) {
    /* Integer coordinate, no filtering; out of range reads 0 (CUDA: undefined beyond the buffer). */
    if (ix < 0 || ix >= t->w) polypy_tex_refuse("tex1Dfetch outside the texture's linear memory (undefined in CUDA)");
    return polypy_tex_texel(t, ix, 0, 0, c);
  }
  int slices = layered ? (cube ? t->d / 6 : t->d) : 1;
  int l = layer < 0 ? 0 : layer >= slices ? slices - 1 : layer;
  float u[3];
  const int clamp3[3] = {cudaAddressModeClamp, cudaAddressModeClamp, cudaAddressModeClamp};
  if (cube) {
    int face = polypy_tex_face(x, y, z, &u[0], &u[1]);
    u[0] *= (float)t->w;
    u[1] *= (float)t->h;
    return polypy_tex_sample(t, u, l * 6 + face, c, clamp3);
  }
  const float xyz[3] = {x, y, z};
  const int n[3] = {t->w, t->h, t->d};
  for (int k = 0; k < t->dims; ++k) u[k] = polypy_tex_coord(xyz[k], n[k], t->addr[k], t->normalized_coords);
  return polypy_tex_sample(t, u, layered ? l : 0, c, t->addr);
}
#define POLYPY_TEX_TYPED(T, name)                                                                             \
  static inline T polypy_tex_##name(unsigned long long h, int op, int ix, float x, float y, float z, int layer, \
                                    int c) {                                                                  \
    return (T)polypy_tex_value(h, op, ix, x, y, z, layer, c);                                                 \
  }
POLYPY_TEX_TYPED(float, f32) POLYPY_TEX_TYPED(int, i32) POLYPY_TEX_TYPED(unsigned int, u32)
POLYPY_TEX_TYPED(short, i16) POLYPY_TEX_TYPED(unsigned short, u16) POLYPY_TEX_TYPED(signed char, i8)
POLYPY_TEX_TYPED(unsigned char, u8)
#undef POLYPY_TEX_TYPED

/* Surfaces: a kernel that reads or writes surface s receives its texels as hidden arguments (the
 * frontend makes the loads, stores and boundary checks, frontend/lower/textures.py):
 * polypy_surf_data(s, dims, layered) and polypy_surf_size(s, 0 / 1 / 2) = bytes per row, rows per
 * slice, slices. The surface's dimensions must be those of the kernel's accesses. */
static inline void* polypy_surf_data(unsigned long long h, int dims, int layered) {
  const struct polypy_tex* t = polypy_tex_get(h, 1);
  if (t->dims != dims || t->layered != layered || t->cubemap)
    polypy_tex_refuse("a surface access whose dimensions are not the surface's (undefined in CUDA)");
  return (void*)t->data;
}
static inline long long polypy_surf_size(unsigned long long h, int which) {
  const struct polypy_tex* t = polypy_tex_get(h, 1);
  return which == 0 ? (long long)t->pitch : which == 1 ? t->h : t->d;
}

/* ------------------------------------------------------------------ texture references */
/* A reference keeps what the host set (sampling state) and bound (linear memory or an array); a
 * launch of a kernel that reads it through tex1D/tex2D/tex3D passes polypy_texref_object(&ref), a
 * texture object made from the reference's state at that moment (tex1Dfetch of linear memory
 * passes the bound pointer itself). */
struct textureReference {
  int normalized;
  enum cudaTextureFilterMode filterMode;
  enum cudaTextureAddressMode addressMode[3];
  struct cudaChannelFormatDesc channelDesc;
  const void* polypy_ptr;          /* bound linear memory */
  cudaArray_const_t polypy_array;  /* bound array */
  enum cudaTextureReadMode polypy_read_mode;
  unsigned long long polypy_obj;
};
template <class T, int dim = 1, enum cudaTextureReadMode mode = cudaReadModeElementType>
struct texture : textureReference {
  texture() {
    normalized = 0; filterMode = cudaFilterModePoint; polypy_ptr = 0; polypy_array = 0; polypy_obj = 0;
    addressMode[0] = addressMode[1] = addressMode[2] = cudaAddressModeClamp;
    channelDesc = cudaCreateChannelDesc<T>();
    polypy_read_mode = mode;
  }
};
static inline cudaError_t cudaBindTexture(size_t* offset, const struct textureReference* tex, const void* devPtr,
                                          const struct cudaChannelFormatDesc* desc, size_t size = ~(size_t)0) {
  (void)desc; (void)size;
  if (offset) *offset = 0;
  ((struct textureReference*)tex)->polypy_ptr = devPtr;
  ((struct textureReference*)tex)->polypy_array = 0;
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
static inline cudaError_t cudaBindTextureToArray(const struct textureReference* tex, cudaArray_const_t array,
                                                 const struct cudaChannelFormatDesc* desc) {
  if (!tex || !array) return polypy_rt_fail(cudaErrorInvalidValue);
  (void)desc;
  ((struct textureReference*)tex)->polypy_array = array;
  ((struct textureReference*)tex)->polypy_ptr = 0;
  return cudaSuccess;
}
template <class T, int dim, enum cudaTextureReadMode mode>
static inline cudaError_t cudaBindTextureToArray(const texture<T, dim, mode>& tex, cudaArray_const_t array) {
  return cudaBindTextureToArray(&tex, array, &array->desc);
}
template <class T, int dim, enum cudaTextureReadMode mode>
static inline cudaError_t cudaBindTextureToArray(const texture<T, dim, mode>& tex, cudaArray_const_t array,
                                                 const struct cudaChannelFormatDesc& desc) {
  return cudaBindTextureToArray(&tex, array, &desc);
}
static inline cudaError_t cudaUnbindTexture(const struct textureReference* tex) {
  ((struct textureReference*)tex)->polypy_ptr = 0;
  ((struct textureReference*)tex)->polypy_array = 0;
  return cudaSuccess;
}
template <class T, int dim, enum cudaTextureReadMode mode>
static inline cudaError_t cudaUnbindTexture(const texture<T, dim, mode>& tex) { return cudaUnbindTexture(&tex); }
/* The texture object a launch passes for a reference bound to an array (remade when its state changed). */
static inline unsigned long long polypy_texref_object(const struct textureReference* ref) {
  struct textureReference* r = (struct textureReference*)ref;
  if (!r->polypy_array) polypy_tex_refuse("a texture reference read with tex1D/tex2D/tex3D that is not bound to an array");
  struct cudaResourceDesc res;
  memset(&res, 0, sizeof res);
  res.resType = cudaResourceTypeArray;
  res.res.array.array = (cudaArray_t)r->polypy_array;
  struct cudaTextureDesc td;
  memset(&td, 0, sizeof td);
  for (int k = 0; k < 3; ++k) td.addressMode[k] = r->addressMode[k];
  td.filterMode = r->filterMode;
  td.readMode = r->polypy_read_mode;
  td.normalizedCoords = r->normalized;
  if (r->polypy_obj) cudaDestroyTextureObject(r->polypy_obj);
  r->polypy_obj = 0;
  if (cudaCreateTextureObject(&r->polypy_obj, &res, &td, 0) != cudaSuccess)
    polypy_tex_refuse("this texture reference's state (CUDA rejects it)");
  /* A texture reference keeps the modes it was given (the switch to clamp is documented for
   * texture objects only): wrap or mirror with unnormalized coordinates outside the texture is
   * refused when a fetch meets it (polypy_tex_check_outside). */
  for (int k = 0; k < 3; ++k) polypy_tex_table()[r->polypy_obj].addr[k] = r->addressMode[k];
  return r->polypy_obj;
}
