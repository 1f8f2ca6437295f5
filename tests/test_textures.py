"""CUDA arrays, texture objects, texture references bound to arrays and surfaces (docs/textures.md).

Each program is ours: it fills an array with values the test knows, fetches at coordinates the
test chose, prints what it fetched, and the test checks every value against a NumPy reference of
the CUDA Programming Guide's "Texture Fetching" formulas (``samples/texture_reference.py``,
written from the guide, not from the runtime's C): nearest point, linear filtering with weights in
1.8 fixed point, normalized coordinates, wrap / clamp / mirror / border addressing, normalized-float reads of 8- and 16-bit
channels, layered and cubemap textures. Surface writes are stores the analyses and the emulator see.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import need_compiler
from polypy.emulator import emulate
from polypy.errors import UserError
from polypy.ir.textures import TEXTURE_ARGS
from samples.texture_reference import BORDER, CLAMP, MIRROR, WRAP, cube_face, fetch, sample

f32 = np.float32


def _run(path: pathlib.Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(path), *extra],
                          capture_output=True, text=True, timeout=600)


def _floats(text: str) -> np.ndarray:
    return np.array([float(v) for v in text.split()], dtype=np.float64)


def _c_floats(values) -> str:
    return "{" + ", ".join(f"{float(v):.9e}f" for v in values) + "}"


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


# --------------------------------------------------------------------------- 2-D float textures

W2, H2 = 7, 5
DATA2 = [((i * 37) % 23 - 11) * 0.25 for i in range(W2 * H2)]
CASES_2D = [(linear, mode, normalized) for linear in (False, True) for mode in (CLAMP, BORDER, WRAP, MIRROR)
            for normalized in (False, True) if normalized or mode in (CLAMP, BORDER)]

PROGRAM_2D = """#include <cstdio>
__global__ void fetch(float* out, const float* xs, const float* ys, int n, cudaTextureObject_t tex) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float>(tex, xs[i], ys[i]);
}
static const float data[] = @DATA@;
static const float xs_u[] = @XU@, ys_u[] = @YU@, xs_n[] = @XN@, ys_n[] = @YN@;
static const int filters[] = @FILTERS@, modes[] = @MODES@, norms[] = @NORMS@;
int main() {
  const int w = @W@, h = @H@, n = @COUNT@;
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaArray_t arr;
  cudaMallocArray(&arr, &cd, w, h);
  cudaMemcpy2DToArray(arr, 0, 0, data, w * sizeof(float), w * sizeof(float), h, cudaMemcpyHostToDevice);
  float *out, *xs, *ys;
  cudaMalloc(&out, n * sizeof(float)); cudaMalloc(&xs, n * sizeof(float)); cudaMalloc(&ys, n * sizeof(float));
  for (int c = 0; c < @CASES@; ++c) {
    cudaResourceDesc rd = {};
    rd.resType = cudaResourceTypeArray;
    rd.res.array.array = arr;
    cudaTextureDesc td = {};
    td.filterMode = filters[c] ? cudaFilterModeLinear : cudaFilterModePoint;
    td.addressMode[0] = td.addressMode[1] = (cudaTextureAddressMode)modes[c];
    td.normalizedCoords = norms[c];
    td.readMode = cudaReadModeElementType;
    cudaTextureObject_t tex;
    if (cudaCreateTextureObject(&tex, &rd, &td, NULL) != cudaSuccess) { printf("create failed\\n"); return 1; }
    cudaMemcpy(xs, norms[c] ? xs_n : xs_u, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(ys, norms[c] ? ys_n : ys_u, n * sizeof(float), cudaMemcpyHostToDevice);
    fetch<<<(n + 63) / 64, 64>>>(out, xs, ys, n, tex);
    float got[@COUNT@];
    cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; ++i) printf("%.9g ", got[i]);
    printf("\\n");
    cudaDestroyTextureObject(tex);
  }
  cudaFreeArray(arr);
  return 0;
}
"""


def _coords(rng, n, lo, hi) -> np.ndarray:
    v = rng.uniform(lo, hi, n).astype(np.float32)
    v[:8] = np.float32([lo, hi, 0.0, 0.5, 1.0, 1.5, -0.5, 2.0 if hi > 2 else 0.25])  # edges and texel centres
    return v


@pytest.mark.parametrize("emulate", [False, True], ids=["translated", "emulated"])
def test_2d_float_textures_every_filter_and_addressing_mode_match_the_formulas(tmp_path, emulate) -> None:
    need_compiler(cpp=True)
    rng = np.random.default_rng(11)
    n = 96
    xu, yu = _coords(rng, n, -2.5, W2 + 2.5), _coords(rng, n, -2.5, H2 + 2.5)
    xn, yn = _coords(rng, n, -1.7, 2.7), _coords(rng, n, -1.7, 2.7)
    source = PROGRAM_2D
    for key, value in {"DATA": _c_floats(DATA2), "XU": _c_floats(xu), "YU": _c_floats(yu), "XN": _c_floats(xn),
                       "YN": _c_floats(yn), "FILTERS": "{" + ", ".join(str(int(c[0])) for c in CASES_2D) + "}",
                       "MODES": "{" + ", ".join(str(c[1]) for c in CASES_2D) + "}",
                       "NORMS": "{" + ", ".join(str(int(c[2])) for c in CASES_2D) + "}",
                       "COUNT": str(n), "CASES": str(len(CASES_2D)), "W": str(W2), "H": str(H2)}.items():
        source = source.replace(f"@{key}@", value)
    path = tmp_path / "tex2d.cu"
    path.write_text(source)
    result = _run(path, *(["--emulate"] if emulate else []))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(CASES_2D)
    tex = np.array(DATA2, dtype=np.float32).reshape(H2, W2)
    for (linear, mode, normalized), line in zip(CASES_2D, lines):
        xs, ys = (xn, yn) if normalized else (xu, yu)
        want = fetch(tex, [xs, ys], linear, [mode, mode], normalized)
        _close(_floats(line), want)


def test_the_weights_of_linear_filtering_are_quantized_to_eight_fractional_bits() -> None:
    """The reference itself: between two texels 0 and 1, x_B fractions 0.3 and 0.3 + 1/1024 give
    the same weight (77/256), not 0.3."""
    tex = np.array([[0.0, 1.0]], dtype=np.float32)
    a = sample(tex, [f32(0.8), f32(0.5)], True, [CLAMP, CLAMP])
    b = sample(tex, [f32(0.8 + 1 / 1024), f32(0.5)], True, [CLAMP, CLAMP])
    assert a == b == f32(77 / 256)


# --------------------------------------------------------------------------- 1-D, 3-D, layered, cubemap, linear memory

SHAPES_PROGRAM = """#include <cstdio>
__global__ void k1(float* out, const float* c, int n, cudaTextureObject_t t) {
  int i = threadIdx.x; if (i < n) out[i] = tex1D<float>(t, c[i]);
}
__global__ void k3(float* out, const float* c, int n, cudaTextureObject_t t) {
  int i = threadIdx.x; if (i < n) out[i] = tex3D<float>(t, c[i], c[n + i], c[2 * n + i]);
}
__global__ void kl(float* out, const float* c, int n, cudaTextureObject_t t) {
  int i = threadIdx.x; if (i < n) out[i] = tex2DLayered<float>(t, c[i], c[n + i], i % 4 - 1);
}
__global__ void kc(float* out, const float* c, int n, cudaTextureObject_t t) {
  int i = threadIdx.x; if (i < n) out[i] = texCubemap<float>(t, c[i], c[n + i], c[2 * n + i]);
}
__global__ void kf(float* out, int n, cudaTextureObject_t t) {
  int i = threadIdx.x; if (i < n) out[i] = tex1Dfetch<float>(t, i) + tex1Dfetch<float>(t, n - 1 - i) * 1000.0f;
}
__global__ void kp(float* out, const float* c, int n, cudaTextureObject_t t) {
  int i = threadIdx.x; if (i < n) out[i] = tex2D<float>(t, c[i], c[n + i]);
}
static const float coords[] = COORDS;
static float values[4096];
static void show(float* d, int n) {
  float h[64];
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) printf("%.9g ", h[i]);
  printf("\\n");
}
static cudaTextureObject_t make(cudaArray_t a, cudaTextureFilterMode f, cudaTextureAddressMode m, int norm) {
  cudaResourceDesc rd = {};
  rd.resType = cudaResourceTypeArray; rd.res.array.array = a;
  cudaTextureDesc td = {};
  td.filterMode = f; td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = m; td.normalizedCoords = norm;
  cudaTextureObject_t t; cudaCreateTextureObject(&t, &rd, &td, NULL);
  return t;
}
int main() {
  const int n = N;
  for (int i = 0; i < 4096; ++i) values[i] = (float)((i * 29) % 31) * 0.5f - 7.0f;
  float *out, *c;
  cudaMalloc(&out, 64 * sizeof(float)); cudaMalloc(&c, sizeof coords);
  cudaMemcpy(c, coords, sizeof coords, cudaMemcpyHostToDevice);
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  /* 1-D: 9 texels, linear, normalized, mirror */
  cudaArray_t a1; cudaMallocArray(&a1, &cd, 9);
  cudaMemcpyToArray(a1, 0, 0, values, 9 * sizeof(float), cudaMemcpyHostToDevice);
  k1<<<1, 64>>>(out, c, n, make(a1, cudaFilterModeLinear, cudaAddressModeMirror, 1)); show(out, n);
  /* 3-D: 5 x 4 x 3, linear, normalized, wrap; filled with cudaMemcpy3D from a pitched host pointer */
  cudaArray_t a3; cudaMalloc3DArray(&a3, &cd, make_cudaExtent(5, 4, 3));
  cudaMemcpy3DParms p = {};
  p.srcPtr = make_cudaPitchedPtr(values, 5 * sizeof(float), 5, 4); p.dstArray = a3;
  p.extent = make_cudaExtent(5, 4, 3); p.kind = cudaMemcpyHostToDevice;
  cudaMemcpy3D(&p);
  k3<<<1, 64>>>(out, c, n, make(a3, cudaFilterModeLinear, cudaAddressModeWrap, 1)); show(out, n);
  /* layered 2-D: 6 x 5, 3 layers, linear, unnormalized, clamp (layer -1 and 3 clamp to 0 and 2) */
  cudaArray_t al; cudaMalloc3DArray(&al, &cd, make_cudaExtent(6, 5, 3), cudaArrayLayered);
  cudaMemcpy3DParms q = {};
  q.srcPtr = make_cudaPitchedPtr(values + 100, 6 * sizeof(float), 6, 5); q.dstArray = al;
  q.extent = make_cudaExtent(6, 5, 3); q.kind = cudaMemcpyHostToDevice;
  cudaMemcpy3D(&q);
  kl<<<1, 64>>>(out, c, n, make(al, cudaFilterModeLinear, cudaAddressModeClamp, 0)); show(out, n);
  /* cubemap: 4 x 4 faces, linear */
  cudaArray_t ac; cudaMalloc3DArray(&ac, &cd, make_cudaExtent(4, 4, 6), cudaArrayCubemap);
  cudaMemcpy3DParms r = {};
  r.srcPtr = make_cudaPitchedPtr(values + 200, 4 * sizeof(float), 4, 4); r.dstArray = ac;
  r.extent = make_cudaExtent(4, 4, 6); r.kind = cudaMemcpyHostToDevice;
  cudaMemcpy3D(&r);
  kc<<<1, 64>>>(out, c, n, make(ac, cudaFilterModeLinear, cudaAddressModeWrap, 1)); show(out, n);
  /* linear memory: tex1Dfetch */
  float* lin; cudaMalloc(&lin, n * sizeof(float));
  cudaMemcpy(lin, values + 300, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaResourceDesc rd = {};
  rd.resType = cudaResourceTypeLinear; rd.res.linear.devPtr = lin; rd.res.linear.desc = cd;
  rd.res.linear.sizeInBytes = n * sizeof(float);
  cudaTextureDesc td = {};
  cudaTextureObject_t tl; cudaCreateTextureObject(&tl, &rd, &td, NULL);
  kf<<<1, 64>>>(out, n, tl); show(out, n);
  /* pitched 2-D memory: 5 x 4 in rows of 8 floats, point, clamp */
  float* pitched; cudaMalloc(&pitched, 8 * 4 * sizeof(float));
  cudaMemcpy(pitched, values + 400, 8 * 4 * sizeof(float), cudaMemcpyHostToDevice);
  cudaResourceDesc rp = {};
  rp.resType = cudaResourceTypePitch2D; rp.res.pitch2D.devPtr = pitched; rp.res.pitch2D.desc = cd;
  rp.res.pitch2D.width = 5; rp.res.pitch2D.height = 4; rp.res.pitch2D.pitchInBytes = 8 * sizeof(float);
  cudaTextureDesc tp = {};
  tp.addressMode[0] = tp.addressMode[1] = cudaAddressModeClamp;
  cudaTextureObject_t t2; cudaCreateTextureObject(&t2, &rp, &tp, NULL);
  kp<<<1, 64>>>(out, c, n, t2); show(out, n);
  cudaResourceDesc back;
  cudaGetTextureObjectResourceDesc(&back, t2);
  printf("%d %d\\n", (int)back.resType, (int)back.res.pitch2D.width);
  return 0;
}
"""


@pytest.mark.parametrize("emulate", [False, True], ids=["translated", "emulated"])
def test_1d_3d_layered_cubemap_and_linear_memory_textures_match_the_formulas(tmp_path, emulate) -> None:
    need_compiler(cpp=True)
    rng = np.random.default_rng(5)
    n = 48
    cx = _coords(rng, n, -1.6, 2.6)
    cy = _coords(rng, n, -1.6, 2.6)
    cz = rng.uniform(-1.6, 2.6, n).astype(np.float32)
    source = SHAPES_PROGRAM.replace("COORDS", _c_floats(np.concatenate([cx, cy, cz]))).replace("= N;", f"= {n};")
    path = tmp_path / "shapes.cu"
    path.write_text(source)
    result = _run(path, *(["--emulate"] if emulate else []))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    values = np.array([((i * 29) % 31) * 0.5 - 7.0 for i in range(4096)], dtype=np.float32)
    # 1-D mirror, normalized
    _close(_floats(lines[0]), fetch(values[:9], [cx], True, [MIRROR], True))
    # 3-D wrap, normalized
    _close(_floats(lines[1]), fetch(values[:60].reshape(3, 4, 5), [cx, cy, cz], True, [WRAP] * 3, True))
    # layered: layer i % 4 - 1 clamped to [0, 2]
    layers = values[100:190].reshape(3, 5, 6)
    want = [sample(layers[min(max(i % 4 - 1, 0), 2)], [f32(cx[i]), f32(cy[i])], True, [CLAMP, CLAMP])
            for i in range(n)]
    _close(_floats(lines[2]), np.array(want, dtype=np.float64))
    # cubemap
    faces = values[200:296].reshape(6, 4, 4)
    want = []
    for i in range(n):
        face, s, t = cube_face(float(cx[i]), float(cy[i]), float(cz[i]))
        want.append(sample(faces[face], [f32(s * f32(4)), f32(t * f32(4))], True, [CLAMP, CLAMP]))
    _close(_floats(lines[3]), np.array(want, dtype=np.float64))
    # tex1Dfetch of linear memory
    lin = values[300:300 + n]
    _close(_floats(lines[4]), lin.astype(np.float64) + lin[::-1].astype(np.float64) * 1000.0)
    # pitched 2-D memory, point sampling, clamp (rows of 8, 5 used)
    rows = values[400:432].reshape(4, 8)[:, :5]
    _close(_floats(lines[5]), fetch(rows, [cx, cy], False, [CLAMP, CLAMP], False))
    assert lines[6] == "3 5"


# --------------------------------------------------------------------------- integer channels, vectors, references

INT_PROGRAM = """#include <cstdio>
__global__ void rgba(float4* out, const float* c, int n, cudaTextureObject_t t) {
  int i = threadIdx.x; if (i < n) out[i] = tex2D<float4>(t, c[i], c[n + i]);
}
__global__ void signed8(float* out, const float* c, int n, cudaTextureObject_t t) {
  int i = threadIdx.x; if (i < n) out[i] = tex1D<float>(t, c[i]);
}
__global__ void short2d(float2* out, const float* c, int n, cudaTextureObject_t t) {
  int i = threadIdx.x; if (i < n) tex2D(&out[i], t, c[i], c[n + i]);
}
__global__ void ints(int2* out, const float* c, int n, cudaTextureObject_t t) {
  int i = threadIdx.x; if (i < n) out[i] = tex2D<int2>(t, c[i], c[n + i]);
}
texture<float, 2, cudaReadModeElementType> ref;
__global__ void legacy(float* out, const float* c, int n) {
  int i = threadIdx.x; if (i < n) out[i] = tex2D(ref, c[i], c[n + i]);
}
static const float coords[] = COORDS;
static cudaTextureObject_t make(cudaArray_t a, cudaTextureFilterMode f, cudaTextureReadMode r, int norm) {
  cudaResourceDesc rd = {};
  rd.resType = cudaResourceTypeArray; rd.res.array.array = a;
  cudaTextureDesc td = {};
  td.filterMode = f; td.readMode = r; td.normalizedCoords = norm;
  td.addressMode[0] = td.addressMode[1] = cudaAddressModeBorder;
  td.borderColor[0] = 0.25f; td.borderColor[1] = 0.5f; td.borderColor[2] = 0.75f; td.borderColor[3] = 1.0f;
  cudaTextureObject_t t;
  if (cudaCreateTextureObject(&t, &rd, &td, NULL) != cudaSuccess) printf("create failed\\n");
  return t;
}
int main() {
  const int n = N, w = 6, h = 5;
  float* c; cudaMalloc(&c, sizeof coords);
  cudaMemcpy(c, coords, sizeof coords, cudaMemcpyHostToDevice);
  float4* o4; cudaMalloc(&o4, 64 * sizeof(float4));
  /* uchar4, normalized float, linear */
  uchar4 px[w * h];
  for (int i = 0; i < w * h; ++i) px[i] = make_uchar4(i * 41 % 256, i * 97 % 256, 255 - i * 13 % 256, i * 7 % 256);
  cudaChannelFormatDesc c4 = cudaCreateChannelDesc<uchar4>();
  cudaArray_t a4; cudaMallocArray(&a4, &c4, w, h);
  cudaMemcpy2DToArray(a4, 0, 0, px, w * sizeof(uchar4), w * sizeof(uchar4), h, cudaMemcpyHostToDevice);
  rgba<<<1, 64>>>(o4, c, n, make(a4, cudaFilterModeLinear, cudaReadModeNormalizedFloat, 0));
  float4 g4[64]; cudaMemcpy(g4, o4, n * sizeof(float4), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) printf("%.9g %.9g %.9g %.9g ", g4[i].x, g4[i].y, g4[i].z, g4[i].w);
  printf("\\n");
  /* signed char, normalized float, linear, normalized coordinates */
  signed char sc[w];
  for (int i = 0; i < w; ++i) sc[i] = (signed char)(i * 61 % 256 - 128);
  cudaChannelFormatDesc c1 = cudaCreateChannelDesc<signed char>();
  cudaArray_t a1; cudaMallocArray(&a1, &c1, w);
  cudaMemcpyToArray(a1, 0, 0, sc, sizeof sc, cudaMemcpyHostToDevice);
  float* o1 = (float*)o4;
  signed8<<<1, 64>>>(o1, c, n, make(a1, cudaFilterModeLinear, cudaReadModeNormalizedFloat, 1));
  float g1[64]; cudaMemcpy(g1, o1, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) printf("%.9g ", g1[i]);
  printf("\\n");
  /* ushort2, normalized float, point */
  ushort2 us[w * h];
  for (int i = 0; i < w * h; ++i) us[i] = make_ushort2(i * 2731 % 65536, 65535 - i * 977 % 65536);
  cudaChannelFormatDesc c2 = cudaCreateChannelDesc<ushort2>();
  cudaArray_t a2; cudaMallocArray(&a2, &c2, w, h);
  cudaMemcpyToArray(a2, 0, 0, us, sizeof us, cudaMemcpyHostToDevice);
  float2* o2 = (float2*)o4;
  short2d<<<1, 64>>>(o2, c, n, make(a2, cudaFilterModePoint, cudaReadModeNormalizedFloat, 0));
  float2 g2[64]; cudaMemcpy(g2, o2, n * sizeof(float2), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) printf("%.9g %.9g ", g2[i].x, g2[i].y);
  printf("\\n");
  /* int2, element type, point */
  int2 iv[w * h];
  for (int i = 0; i < w * h; ++i) iv[i] = make_int2(i * 100003 - 1500000, -i);
  cudaChannelFormatDesc ci = cudaCreateChannelDesc<int2>();
  cudaArray_t ai; cudaMallocArray(&ai, &ci, w, h);
  cudaMemcpyToArray(ai, 0, 0, iv, sizeof iv, cudaMemcpyHostToDevice);
  int2* oi = (int2*)o4;
  ints<<<1, 64>>>(oi, c, n, make(ai, cudaFilterModePoint, cudaReadModeElementType, 0));
  int2 gi[64]; cudaMemcpy(gi, oi, n * sizeof(int2), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) printf("%d %d ", gi[i].x, gi[i].y);
  printf("\\n");
  /* a texture reference bound to an array, linear filtering, clamp */
  float fv[w * h];
  for (int i = 0; i < w * h; ++i) fv[i] = (float)(i % 7) - 0.5f * (float)(i / 7);
  cudaChannelFormatDesc cf = cudaCreateChannelDesc<float>();
  cudaArray_t af; cudaMallocArray(&af, &cf, w, h);
  cudaMemcpyToArray(af, 0, 0, fv, sizeof fv, cudaMemcpyHostToDevice);
  ref.filterMode = cudaFilterModeLinear;
  cudaBindTextureToArray(ref, af);
  legacy<<<1, 64>>>(o1, c, n);
  cudaMemcpy(g1, o1, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) printf("%.9g ", g1[i]);
  printf("\\n");
  return 0;
}
"""


@pytest.mark.parametrize("emulate", [False, True], ids=["translated", "emulated"])
def test_integer_channels_vectors_border_colour_and_texture_references(tmp_path, emulate) -> None:
    need_compiler(cpp=True)
    rng = np.random.default_rng(7)
    n = 40
    cx, cy = _coords(rng, n, -1.5, 7.5), _coords(rng, n, -1.5, 6.5)
    coords = np.concatenate([cx, cy])
    path = tmp_path / "ints.cu"
    path.write_text(INT_PROGRAM.replace("COORDS", _c_floats(coords)).replace("= N,", f"= {n},"))
    result = _run(path, *(["--emulate"] if emulate else []))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    w, h = 6, 5
    i = np.arange(w * h)
    border = (0.25, 0.5, 0.75, 1.0)
    px = np.stack([i * 41 % 256, i * 97 % 256, 255 - i * 13 % 256, i * 7 % 256], axis=1)
    got = _floats(lines[0]).reshape(n, 4)
    for ch in range(4):
        tex = (px[:, ch].astype(np.float32) / f32(255)).astype(np.float32).reshape(h, w)
        _close(got[:, ch], fetch(tex, [cx, cy], True, [BORDER, BORDER], False, border[ch]))
    # signed char: v / 127, at least -1 (the 1-D kernel reads the first n coordinates as normalized ones)
    sc = ((np.arange(w) * 61) % 256 - 128).astype(np.float32)
    tex1 = np.maximum(sc / f32(127), f32(-1)).astype(np.float32)
    _close(_floats(lines[1]), fetch(tex1, [cx], True, [BORDER], True, border[0]))
    us = np.stack([i * 2731 % 65536, 65535 - i * 977 % 65536], axis=1)
    got = _floats(lines[2]).reshape(n, 2)
    for ch in range(2):
        tex = (us[:, ch].astype(np.float32) / f32(65535)).astype(np.float32).reshape(h, w)
        _close(got[:, ch], fetch(tex, [cx, cy], False, [BORDER, BORDER], False, border[ch]))
    iv = np.stack([i * 100003 - 1500000, -i], axis=1)
    got = _floats(lines[3]).reshape(n, 2)
    for ch in range(2):
        tex = iv[:, ch].astype(np.float64).reshape(h, w)
        want = []
        for k in range(n):
            x, y = int(np.floor(cx[k])), int(np.floor(cy[k]))
            inside = 0 <= x < w and 0 <= y < h
            want.append(tex[y, x] if inside else float(np.int32(np.float32(border[ch]))))
        np.testing.assert_array_equal(got[:, ch], np.array(want))
    fv = (i % 7 - 0.5 * (i // 7)).astype(np.float32).reshape(h, w)
    _close(_floats(lines[4]), fetch(fv, [cx, cy], True, [CLAMP, CLAMP], False))


# --------------------------------------------------------------------------- surfaces

SURFACE_PROGRAM = """#include <cstdio>
__global__ void write(const float* in, int w, int h, cudaSurfaceObject_t s) {
  int x = threadIdx.x, y = threadIdx.y;
  if (x < w && y < h) surf2Dwrite(in[y * w + x] * 2.0f, s, x * 4, y);
}
__global__ void read(float* out, int w, int h, cudaSurfaceObject_t s) {
  int x = threadIdx.x, y = threadIdx.y;
  out[y * (w + 2) + x] = surf2Dread<float>(s, (x - 1) * 4, y - 1, cudaBoundaryModeZero) +
                         100.0f * surf2Dread<float>(s, (x - 1) * 4, y - 1, cudaBoundaryModeClamp);
}
__global__ void write4(cudaSurfaceObject_t s) {
  uchar4 v = make_uchar4(threadIdx.x, threadIdx.y, 7, 9);
  surf2Dwrite(v, s, (threadIdx.x - 1) * 4, threadIdx.y, cudaBoundaryModeZero);
}
__global__ void trap(cudaSurfaceObject_t s, int x) { surf2Dwrite(1.0f, s, x, 0, cudaBoundaryModeTrap); }
static cudaSurfaceObject_t surface(cudaArray_t a) {
  cudaResourceDesc rd = {};
  rd.resType = cudaResourceTypeArray; rd.res.array.array = a;
  cudaSurfaceObject_t s; cudaCreateSurfaceObject(&s, &rd);
  return s;
}
int main() {
  const int w = 5, h = 3;
  float data[w * h];
  for (int i = 0; i < w * h; ++i) data[i] = (float)i - 4.0f;
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaArray_t arr; cudaMallocArray(&arr, &cd, w, h, cudaArraySurfaceLoadStore);
  cudaSurfaceObject_t s = surface(arr);
  float *in, *out; cudaMalloc(&in, sizeof data); cudaMalloc(&out, (w + 2) * (h + 2) * sizeof(float));
  cudaMemcpy(in, data, sizeof data, cudaMemcpyHostToDevice);
  write<<<1, dim3(8, 4)>>>(in, w, h, s);
  float back[w * h];
  cudaMemcpy2DFromArray(back, w * sizeof(float), arr, 0, 0, w * sizeof(float), h, cudaMemcpyDeviceToHost);
  for (int i = 0; i < w * h; ++i) printf("%g ", back[i]);
  printf("\\n");
  read<<<1, dim3(w + 2, h + 2)>>>(out, w, h, s);
  float o[(w + 2) * (h + 2)]; cudaMemcpy(o, out, sizeof o, cudaMemcpyDeviceToHost);
  for (int i = 0; i < (w + 2) * (h + 2); ++i) printf("%g ", o[i]);
  printf("\\n");
  cudaChannelFormatDesc c4 = cudaCreateChannelDesc<uchar4>();
  cudaArray_t a4; cudaMallocArray(&a4, &c4, 3, 2, cudaArraySurfaceLoadStore);
  cudaSurfaceObject_t s4 = surface(a4);
  write4<<<1, dim3(5, 2)>>>(s4);
  uchar4 px[6];
  cudaMemcpyFromArray(px, a4, 0, 0, sizeof px, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 6; ++i) printf("%d %d %d %d ", px[i].x, px[i].y, px[i].z, px[i].w);
  printf("\\n");
  trap<<<1, 1>>>(s, 4 * w - 4);
  printf("inside: %s\\n", cudaGetErrorName(cudaDeviceSynchronize()));
  trap<<<1, 1>>>(s, 4 * w);
  printf("outside: %s\\n", cudaGetErrorName(cudaDeviceSynchronize()));
  return 0;
}
"""


@pytest.mark.parametrize("emulate", [False, True], ids=["translated", "emulated"])
def test_surface_writes_and_reads_with_every_boundary_mode(tmp_path, emulate) -> None:
    need_compiler(cpp=True)
    path = tmp_path / "surface.cu"
    path.write_text(SURFACE_PROGRAM)
    result = _run(path, *(["--emulate"] if emulate else []))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    w, h = 5, 3
    stored = (np.arange(w * h) - 4.0) * 2.0
    np.testing.assert_array_equal(_floats(lines[0]), stored)
    grid = stored.reshape(h, w)
    want = []
    for y in range(h + 2):
        for x in range(w + 2):
            inside = 0 <= x - 1 < w and 0 <= y - 1 < h
            zero = grid[y - 1, x - 1] if inside else 0.0
            clamp = grid[min(max(y - 1, 0), h - 1), min(max(x - 1, 0), w - 1)]
            want.append(zero + 100.0 * clamp)
    np.testing.assert_array_equal(_floats(lines[1]), np.array(want))
    # uchar4 writes at byte x (tx - 1) * 4: thread 0 and 4 are outside (zero mode: nothing written)
    px = [int(v) for v in lines[2].split()]
    want4 = []
    for y in range(2):
        for x in range(3):
            want4 += [x + 1, y, 7, 9]
    assert px == want4
    assert lines[3] == "inside: cudaSuccess"
    assert lines[4] == "outside: cudaErrorAssert"
    assert "surf2Dwrite within the surface (cudaBoundaryModeTrap)" in result.stderr


def test_a_surface_write_is_a_store_the_race_check_sees(tmp_path) -> None:
    """Two threads of a block writing the same surface texel: the emulator's race check reports it
    (the write is a store of the surface's memory, not an opaque call)."""
    need_compiler(cpp=True)
    path = tmp_path / "race.cu"
    path.write_text("""#include <cstdio>
__global__ void k(cudaSurfaceObject_t s) { surf2Dwrite((float)threadIdx.x, s, 0, 0); }
int main() {
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaArray_t a; cudaMallocArray(&a, &cd, 4, 4, cudaArraySurfaceLoadStore);
  cudaResourceDesc rd = {};
  rd.resType = cudaResourceTypeArray; rd.res.array.array = a;
  cudaSurfaceObject_t s; cudaCreateSurfaceObject(&s, &rd);
  k<<<1, 2>>>(s);
  cudaDeviceSynchronize();
  return 0;
}
""")
    result = _run(path, "--emulate")
    assert result.returncode != 0
    assert "race" in result.stderr and f"{path}:2:" in result.stderr, result.stderr


LAYERS_PROGRAM = r"""#include <cstdio>
__global__ void l1(float* out, cudaTextureObject_t t) { int i = threadIdx.x; out[i] = tex1DLayered<float>(t, i * 0.7f - 1.0f, i % 3); }
__global__ void cl(float* out, cudaTextureObject_t t) { int i = threadIdx.x; out[i] = texCubemapLayered<float>(t, (i % 5) - 2.0f, 1.5f - (i % 3), 0.25f * i - 2.1f, i % 2); }
__global__ void s3(cudaSurfaceObject_t s) { surf3Dwrite((int)(threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z), s, threadIdx.x * 4, threadIdx.y, threadIdx.z); }
__global__ void sl(int* out, cudaSurfaceObject_t s) { out[threadIdx.x] = surf2DLayeredread<int>(s, (threadIdx.x % 3) * 4, 1, threadIdx.x / 3, cudaBoundaryModeZero); }
int main() {
  float v[256]; for (int i = 0; i < 256; ++i) v[i] = (float)((i * 13) % 17);
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaArray_t a; cudaMalloc3DArray(&a, &cd, make_cudaExtent(4, 0, 3), cudaArrayLayered);
  cudaMemcpy3DParms p = {}; p.srcPtr = make_cudaPitchedPtr(v, 16, 4, 1); p.dstArray = a; p.extent = make_cudaExtent(4, 1, 3);
  printf("copy %d\n", (int)cudaMemcpy3D(&p));
  cudaResourceDesc rd = {}; rd.resType = cudaResourceTypeArray; rd.res.array.array = a;
  cudaTextureDesc td = {}; td.filterMode = cudaFilterModeLinear; td.addressMode[0] = cudaAddressModeClamp;
  cudaTextureObject_t t; cudaCreateTextureObject(&t, &rd, &td, 0);
  float* o; cudaMalloc(&o, 64 * 4); float h[64];
  l1<<<1, 8>>>(o, t); cudaMemcpy(h, o, 32, cudaMemcpyDeviceToHost); for (int i = 0; i < 8; ++i) printf("%g ", h[i]); printf("\n");
  cudaArray_t c; cudaMalloc3DArray(&c, &cd, make_cudaExtent(2, 2, 12), cudaArrayLayered | cudaArrayCubemap);
  cudaMemcpy3DParms q = {}; q.srcPtr = make_cudaPitchedPtr(v, 8, 2, 2); q.dstArray = c; q.extent = make_cudaExtent(2, 2, 12);
  cudaMemcpy3D(&q);
  rd.res.array.array = c; td.normalizedCoords = 1; cudaTextureObject_t tc; cudaCreateTextureObject(&tc, &rd, &td, 0);
  cl<<<1, 8>>>(o, tc); cudaMemcpy(h, o, 32, cudaMemcpyDeviceToHost); for (int i = 0; i < 8; ++i) printf("%g ", h[i]); printf("\n");
  cudaChannelFormatDesc ci = cudaCreateChannelDesc<int>();
  cudaArray_t a3; cudaMalloc3DArray(&a3, &ci, make_cudaExtent(3, 2, 2), cudaArraySurfaceLoadStore);
  rd.res.array.array = a3; cudaSurfaceObject_t s; cudaCreateSurfaceObject(&s, &rd);
  s3<<<1, dim3(3, 2, 2)>>>(s);
  int back[12]; cudaMemcpy3DParms r = {}; r.srcArray = a3; r.dstPtr = make_cudaPitchedPtr(back, 12, 3, 2); r.extent = make_cudaExtent(3, 2, 2);
  cudaMemcpy3D(&r); for (int i = 0; i < 12; ++i) printf("%d ", back[i]); printf("\n");
  cudaArray_t al; cudaMalloc3DArray(&al, &ci, make_cudaExtent(3, 2, 2), cudaArrayLayered | cudaArraySurfaceLoadStore);
  int src[12]; for (int i = 0; i < 12; ++i) src[i] = i * 11;
  cudaMemcpy3DParms w = {}; w.srcPtr = make_cudaPitchedPtr(src, 12, 3, 2); w.dstArray = al; w.extent = make_cudaExtent(3, 2, 2); cudaMemcpy3D(&w);
  rd.res.array.array = al; cudaSurfaceObject_t sl_; cudaCreateSurfaceObject(&sl_, &rd);
  int* oi = (int*)o; sl<<<1, 8>>>(oi, sl_); int hi[8]; cudaMemcpy(hi, oi, 32, cudaMemcpyDeviceToHost); for (int i = 0; i < 8; ++i) printf("%d ", hi[i]); printf("\n");
  return 0;
}
"""


@pytest.mark.parametrize("emulate", [False, True], ids=["translated", "emulated"])
def test_1d_layered_cubemap_layered_3d_and_layered_surfaces(tmp_path, emulate) -> None:
    need_compiler(cpp=True)
    path = tmp_path / "layers.cu"
    path.write_text(LAYERS_PROGRAM)
    result = _run(path, *(["--emulate"] if emulate else []))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "copy 0"
    v = np.array([(i * 13) % 17 for i in range(256)], dtype=np.float32)
    layers = v[:12].reshape(3, 4)
    want = [sample(layers[i % 3], [f32(f32(i) * f32(0.7) - f32(1.0))], True, [CLAMP]) for i in range(8)]
    _close(_floats(lines[1]), np.array(want, dtype=np.float64))
    faces = v[:48].reshape(2, 6, 2, 2)
    want = []
    for i in range(8):
        x, y, z = f32(i % 5 - 2.0), f32(1.5 - i % 3), f32(f32(0.25) * f32(i) - f32(2.1))
        face, fs, ft = cube_face(float(x), float(y), float(z))
        want.append(sample(faces[i % 2, face], [f32(fs * f32(2)), f32(ft * f32(2))], True, [CLAMP, CLAMP]))
    _close(_floats(lines[2]), np.array(want, dtype=np.float64))
    assert lines[3].split() == [str(x + 10 * y + 100 * z) for z in range(2) for y in range(2) for x in range(3)]
    src = [i * 11 for i in range(12)]
    assert lines[4].split() == [str(src[(t // 3) * 6 + 3 + t % 3]) if t // 3 < 2 else "0" for t in range(8)]


# --------------------------------------------------------------------------- refusals

def _program_2d(**values: str) -> str:
    source = PROGRAM_2D
    for key, value in values.items():
        source = source.replace(f"@{key}@", value)
    return source


ONE_FETCH = dict(DATA="{1, 2}", XU="{0}", YU="{0}", XN="{0}", YN="{0}", FILTERS="{0}", NORMS="{0}", COUNT="1",
                 CASES="1", W="2", H="1")


def test_the_llvm_backend_kernel_libraries_and_the_bare_emulator_refuse_texture_fetches_with_their_location(
        tmp_path) -> None:
    """Texture objects live in a whole program's runtime: the LLVM backend, a kernel library and
    the emulator outside ``polypy run --emulate`` refuse a fetch, located at it."""
    library = tmp_path / "lib.cu"
    library.write_text("__global__ void k(float* o, cudaTextureObject_t t) { o[threadIdx.x] = tex2D<float>(t, 0.5f, "
                       "0.5f); }\n")
    with pytest.raises(UserError) as info:
        polypy.compile(str(library)).k.compiled
    assert "texture fetches are not supported by the LLVM backend" in info.value.message
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (1, 71)
    with pytest.raises(UserError) as info:
        emulate(polypy.load(str(library)).kernel("k"), 1, 1, {"o": np.zeros(1, np.float32), "t": 1})
    assert "texture fetches are not supported by the emulator outside whole programs" in info.value.message
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (1, 71)
    out = tmp_path / "lib.cpp"
    result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(library), "-o", str(out)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 1 and "Traceback" not in result.stderr and not out.exists()
    assert f"{library}:1:71: error: texture fetches are only translated in whole programs" in result.stderr


@pytest.mark.parametrize("mode", ["0", "2"], ids=["wrap", "mirror"])
def test_wrap_and_mirror_with_unnormalized_coordinates_are_clamp_for_texture_objects(tmp_path, mode) -> None:
    """cudaCreateTextureObject documents the switch: with unnormalized coordinates, wrap and
    mirror are not supported and become clamp (texel 2.5 of a 2-texel row is texel 1, -3 is 0)."""
    need_compiler(cpp=True)
    path = tmp_path / "wrap.cu"
    path.write_text(_program_2d(MODES="{" + mode + "}", **dict(ONE_FETCH, XU="{2.5}")))
    result = _run(path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2"]
    path.write_text(_program_2d(MODES="{" + mode + "}", **dict(ONE_FETCH, XU="{-3}")))
    result = _run(path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1"]


def test_a_texture_fetch_is_one_pure_call_per_component_in_the_ir_text(tmp_path) -> None:
    """``tex2D<float4>`` becomes four ``texture<f32>(obj, 2, 0, x, y, 0.0, 0, c)`` calls (c = 0..3);
    the IR text prints them with their result type and parses back to the same kernel, which the
    verifier accepts; a texture call with a wrong argument type is a verifier error."""
    from polypy.ir import parse_kernel, print_kernel, verify_kernel
    from polypy.ir import nodes as n
    from polypy.ir.types import F32, I32

    path = tmp_path / "k.cu"
    path.write_text("__global__ void k(float4* o, cudaTextureObject_t t, float x) {\n"
                    "  o[threadIdx.x] = tex2D<float4>(t, x, 0.5f);\n}\n")
    kernel = polypy.load(str(path)).kernel("k")
    calls = [e for s in kernel.body for e in _walk_exprs(s) if isinstance(e, n.Call) and e.fn == "texture"]
    assert sorted(int(c.args[7].value) for c in calls) == [0, 1, 2, 3]
    assert all(c.rtype == F32 and int(c.args[1].value) == 2 for c in calls)
    text = print_kernel(kernel)
    assert "  o[threadIdx.x * 4u + 3u] = texture<f32>(t, 2, 0, x, 0.5f, 0.0f, 0, 3)\n" in text
    again = parse_kernel(text)
    assert print_kernel(again) == text
    verify_kernel(again)
    bad = parse_kernel(text.replace("texture<f32>(t, 2, 0, x", "texture<f32>(t, 2, 0.0f, x", 1))
    with pytest.raises(Exception, match="argument 2 of texture is f32, not i32"):
        verify_kernel(bad)
    assert I32 in TEXTURE_ARGS


def _walk_exprs(s):
    from polypy.ir.visitor import walk
    return list(walk(s))


def test_a_surface_argument_with_effects_is_refused_at_the_launch(tmp_path) -> None:
    """The surface's hidden arguments read the launch's argument again: ``a[i++]`` would step
    ``i`` once per reading, so only variables (members, elements) are taken."""
    path = tmp_path / "effects.cu"
    path.write_text("__global__ void k(cudaSurfaceObject_t s) { surf2Dwrite(1.0f, s, 0, 0); }\n"
                    "int main() { cudaSurfaceObject_t a[2] = {0, 0}; int i = 0; k<<<1, 1>>>(a[i++]); return 0; }\n")
    out = tmp_path / "effects.cpp"
    result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(path), "-o", str(out)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 1 and "Traceback" not in result.stderr and not out.exists()
    assert f"{path}:2:72: error: a surface object argument that is not a variable" in result.stderr


def test_a_programs_own_function_named_like_a_texture_function_stays_its_own(tmp_path) -> None:
    path = tmp_path / "own.cu"
    path.write_text("__device__ float tex1D(const float* p, float x) { return p[(int)x] * 2.0f; }\n"
                    "__global__ void k(const float* p, float* o) { o[threadIdx.x] = tex1D(p, threadIdx.x); }\n")
    p = np.arange(8, dtype=np.float32)
    o = np.zeros(8, dtype=np.float32)
    emulate(polypy.load(str(path)).kernel("k"), 1, 8, {"p": p, "o": o})
    np.testing.assert_array_equal(o, 2.0 * p)


def test_a_device_function_writes_the_kernels_surface_parameter(tmp_path) -> None:
    """The device function's parameter is a copy of the kernel's: its accesses are the kernel
    parameter's (the same hidden arguments)."""
    need_compiler(cpp=True)
    path = tmp_path / "helper.cu"
    path.write_text("""#include <cstdio>
__device__ void put(cudaSurfaceObject_t s, int x, int y, float v) { surf2Dwrite(v, s, x * 4, y); }
__device__ float get(cudaSurfaceObject_t s, int x, int y) { return surf2Dread<float>(s, x * 4, y); }
__global__ void k(cudaSurfaceObject_t s) { put(s, threadIdx.x, threadIdx.y, threadIdx.x + 10.0f * threadIdx.y); }
__global__ void k2(cudaSurfaceObject_t s, float* o) {
  o[threadIdx.y * 3 + threadIdx.x] = get(s, 2 - threadIdx.x, threadIdx.y);
}
int main() {
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<float>();
  cudaArray_t a; cudaMallocArray(&a, &cd, 3, 2, cudaArraySurfaceLoadStore);
  cudaResourceDesc rd = {};
  rd.resType = cudaResourceTypeArray; rd.res.array.array = a;
  cudaSurfaceObject_t s; cudaCreateSurfaceObject(&s, &rd);
  float* o; cudaMalloc(&o, 6 * sizeof(float));
  k<<<1, dim3(3, 2)>>>(s);
  k2<<<1, dim3(3, 2)>>>(s, o);
  float h[6], r[6];
  cudaMemcpy2DFromArray(h, 3 * sizeof(float), a, 0, 0, 3 * sizeof(float), 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(r, o, sizeof r, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 6; ++i) printf("%g ", h[i]);
  printf("\\n");
  for (int i = 0; i < 6; ++i) printf("%g ", r[i]);
  printf("\\n");
  return 0;
}
""")
    for mode in ((), ("--emulate",)):
        result = _run(path, *mode)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == ["0 1 2 10 11 12 ", "2 1 0 12 11 10 "]


def test_far_outside_coordinates_read_the_edge_and_nan_coordinates_are_refused(tmp_path) -> None:
    need_compiler(cpp=True)
    far = tmp_path / "far.cu"
    far.write_text(_program_2d(MODES="{1}", **dict(ONE_FETCH, XU="{3e30f}")))
    result = _run(far)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2"]  # clamp: the last texel of {1, 2}
    nan = tmp_path / "nan.cu"
    nan.write_text(_program_2d(MODES="{1}", **dict(ONE_FETCH, XU='{__builtin_nanf("")}')))
    result = _run(nan)
    assert result.returncode == 1
    assert "polypy: a NaN texture coordinate (or an infinite one with wrap or mirror) is not supported" in result.stderr
