// vector_params: kernels whose pointer parameters have CUDA vector types (float4*, int2*,
// double2*), launched from a host main that allocates and passes memory of those types.
//   shuffle4:  b[i] = (2 a.x, a.y + a.x, a.z - 1, a.w * a.y)       float4 in, float4 out
//   pairs:     q[i] = (p.x + p.y, 3 p.x - p.y)                      int2 in, int2 out
//   square2:   w[i] = z[i]^2 as a complex number (x^2 - y^2, 2 x y)  double2 in place
// Regression for issue 10 item 4: the launcher of a whole program takes the source's pointer
// types (the host passes float4*, not float*).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void shuffle4(const float4* a, float4* b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float4 v = a[i];
        b[i] = make_float4(2.0f * v.x, v.y + v.x, v.z - 1.0f, v.w * v.y);
    }
}

__global__ void pairs(const int2* __restrict__ p, int2* q, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int2 v = p[i];
        q[i] = make_int2(v.x + v.y, 3 * v.x - v.y);
    }
}

__global__ void square2(double2* z, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        double x = z[i].x, y = z[i].y;
        z[i].x = x * x - y * y;
        z[i].y = 2.0 * x * y;
    }
}

int main()
{
    const int n = 1000;
    float4* ha = (float4*)malloc(n * sizeof(float4));
    int2* hp = (int2*)malloc(n * sizeof(int2));
    double2* hz = (double2*)malloc(n * sizeof(double2));
    for (int i = 0; i < n; ++i) {
        ha[i] = make_float4((float)(i % 17), (float)(i % 5) * 0.5f, (float)(i % 3), 0.25f * (float)(i % 4));
        hp[i] = make_int2(i, (i * 7) % 11);
        hz[i] = make_double2(0.001 * i, 1.0 - 0.002 * i);
    }
    float4 *da, *db;
    int2 *dp, *dq;
    double2* dz;
    cudaMalloc((void**)&da, n * sizeof(float4));
    cudaMalloc((void**)&db, n * sizeof(float4));
    cudaMalloc((void**)&dp, n * sizeof(int2));
    cudaMalloc((void**)&dq, n * sizeof(int2));
    cudaMalloc((void**)&dz, n * sizeof(double2));
    cudaMemcpy(da, ha, n * sizeof(float4), cudaMemcpyHostToDevice);
    cudaMemcpy(dp, hp, n * sizeof(int2), cudaMemcpyHostToDevice);
    cudaMemcpy(dz, hz, n * sizeof(double2), cudaMemcpyHostToDevice);

    shuffle4<<<(n + 127) / 128, 128>>>(da, db, n);
    pairs<<<(n + 63) / 64, 64>>>(dp, dq, n);
    square2<<<(n + 255) / 256, 256>>>(dz, n);

    float4* hb = (float4*)malloc(n * sizeof(float4));
    int2* hq = (int2*)malloc(n * sizeof(int2));
    cudaMemcpy(hb, db, n * sizeof(float4), cudaMemcpyDeviceToHost);
    cudaMemcpy(hq, dq, n * sizeof(int2), cudaMemcpyDeviceToHost);
    cudaMemcpy(hz, dz, n * sizeof(double2), cudaMemcpyDeviceToHost);

    double sx = 0.0, sy = 0.0, sz = 0.0, sw = 0.0, zx = 0.0, zy = 0.0;
    long long qx = 0, qy = 0;
    for (int i = 0; i < n; ++i) {
        sx += hb[i].x; sy += hb[i].y; sz += hb[i].z; sw += hb[i].w;
        qx += hq[i].x; qy += hq[i].y;
        zx += hz[i].x; zy += hz[i].y;
    }
    printf("float4: %.3f %.3f %.3f %.3f b[7] = (%.2f, %.2f, %.2f, %.2f)\n", sx, sy, sz, sw,
           hb[7].x, hb[7].y, hb[7].z, hb[7].w);
    printf("int2: %lld %lld q[999] = (%d, %d)\n", qx, qy, hq[999].x, hq[999].y);
    printf("double2: %.6f %.6f z[10] = (%.8f, %.8f)\n", zx, zy, hz[10].x, hz[10].y);

    cudaFree(da); cudaFree(db); cudaFree(dp); cudaFree(dq); cudaFree(dz);
    free(ha); free(hb); free(hp); free(hq); free(hz);
    return 0;
}
