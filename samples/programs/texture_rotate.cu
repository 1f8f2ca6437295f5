// texture_rotate: an image rotated through a texture object, quantized into a second CUDA array
// with surface writes, and read back through a normalized-float texture.
//   1. img (W x H floats) -> CUDA array; a texture object: linear filtering, normalized
//      coordinates, wrap addressing; rotate: out(x, y) = tex2D(tex, rotated (x, y)) (cos 0.8, sin 0.6)
//   2. quantize: surf2Dwrite(uchar4(q, 255 - q, x, y)) into a uchar4 array, q = out * 64 + 128 clamped
//   3. a texture over the uchar4 array, cudaReadModeNormalizedFloat, point sampling, clamp:
//      back(x, y) = the four channels read at the texel's centre shifted by (0.75, -0.25), summed
// The host prints sums (in double) and a few values.
#include <cstdio>
#include <cuda_runtime.h>

#define W 20
#define H 12

__global__ void rotate(float* out, int w, int h, float c, float s, cudaTextureObject_t tex)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float u = (float)x / (float)w - 0.5f;
    float v = (float)y / (float)h - 0.5f;
    float tu = u * c - v * s + 0.5f;
    float tv = v * c + u * s + 0.5f;
    out[y * w + x] = tex2D<float>(tex, tu, tv);
}

__global__ void quantize(const float* in, int w, int h, cudaSurfaceObject_t surf)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float q = in[y * w + x] * 64.0f + 128.0f;
    q = fminf(fmaxf(q, 0.0f), 255.0f);
    unsigned char b = (unsigned char)q;
    surf2Dwrite(make_uchar4(b, 255 - b, x, y), surf, x * (int)sizeof(uchar4), y);
}

__global__ void readback(float* out, int w, int h, cudaTextureObject_t tex)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float4 p = tex2D<float4>(tex, x + 0.75f, y - 0.25f);
    out[y * w + x] = p.x + p.y + p.z + p.w;
}

int main()
{
    float img[W * H];
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
            img[y * W + x] = (float)((x * 7 + y * 13) % 17) * 0.125f - 1.0f;

    cudaChannelFormatDesc fdesc = cudaCreateChannelDesc<float>();
    cudaArray_t src;
    cudaMallocArray(&src, &fdesc, W, H);
    cudaMemcpy2DToArray(src, 0, 0, img, W * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice);

    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    res.res.array.array = src;
    cudaTextureDesc td = {};
    td.normalizedCoords = 1;
    td.filterMode = cudaFilterModeLinear;
    td.addressMode[0] = cudaAddressModeWrap;
    td.addressMode[1] = cudaAddressModeWrap;
    td.readMode = cudaReadModeElementType;
    cudaTextureObject_t tex;
    cudaCreateTextureObject(&tex, &res, &td, NULL);

    float* d_out;
    cudaMalloc(&d_out, W * H * sizeof(float));
    dim3 block(8, 8), grid((W + 7) / 8, (H + 7) / 8);
    rotate<<<grid, block>>>(d_out, W, H, 0.8f, 0.6f, tex);
    float out[W * H];
    cudaMemcpy(out, d_out, sizeof out, cudaMemcpyDeviceToHost);
    double sum = 0.0;
    for (int i = 0; i < W * H; ++i) sum += out[i];
    printf("rotated: sum = %.5f, out[0] = %.6f, out[%d] = %.6f\n", sum, out[0], W * H / 2 + 3, out[W * H / 2 + 3]);

    cudaChannelFormatDesc bdesc = cudaCreateChannelDesc<uchar4>();
    cudaArray_t bytes;
    cudaMallocArray(&bytes, &bdesc, W, H, cudaArraySurfaceLoadStore);
    cudaResourceDesc bres = {};
    bres.resType = cudaResourceTypeArray;
    bres.res.array.array = bytes;
    cudaSurfaceObject_t surf;
    cudaCreateSurfaceObject(&surf, &bres);
    quantize<<<grid, block>>>(d_out, W, H, surf);
    uchar4 px[W * H];
    cudaMemcpy2DFromArray(px, W * sizeof(uchar4), bytes, 0, 0, W * sizeof(uchar4), H, cudaMemcpyDeviceToHost);
    long channels[4] = {0, 0, 0, 0};
    for (int i = 0; i < W * H; ++i) {
        channels[0] += px[i].x; channels[1] += px[i].y; channels[2] += px[i].z; channels[3] += px[i].w;
    }
    printf("quantized: %ld %ld %ld %ld\n", channels[0], channels[1], channels[2], channels[3]);

    cudaTextureDesc nd = {};
    nd.filterMode = cudaFilterModePoint;
    nd.addressMode[0] = cudaAddressModeClamp;
    nd.addressMode[1] = cudaAddressModeClamp;
    nd.readMode = cudaReadModeNormalizedFloat;
    cudaTextureObject_t ntex;
    cudaCreateTextureObject(&ntex, &bres, &nd, NULL);
    readback<<<grid, block>>>(d_out, W, H, ntex);
    cudaMemcpy(out, d_out, sizeof out, cudaMemcpyDeviceToHost);
    sum = 0.0;
    for (int i = 0; i < W * H; ++i) sum += out[i];
    printf("normalized: sum = %.5f, back[%d] = %.6f\n", sum, W + 1, out[W + 1]);

    cudaDestroyTextureObject(tex);
    cudaDestroyTextureObject(ntex);
    cudaDestroySurfaceObject(surf);
    cudaFreeArray(src);
    cudaFreeArray(bytes);
    cudaFree(d_out);
    return 0;
}
