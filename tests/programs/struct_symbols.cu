// __constant__ and __device__ arrays of vector types and records, set by the host with
// cudaMemcpyToSymbol and read member by member in kernels (Rodinia cfd's
// `__constant__ float3 ff_flux_contribution_momentum_x[1]` pattern).
#include <cstdio>
#include <cuda_runtime.h>

struct Coef { float scale; float shift; };

__constant__ float3 flux[2];
__constant__ Coef coef[3];
__device__ int2 table[2][3];

__global__ void combine(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Coef c = coef[i % 3];
    int2 t = table[i % 2][i % 3];
    out[i] = c.scale * in[i] + c.shift + flux[0].x + 10.0f * flux[0].z + 100.0f * flux[1].y
             + (float)(t.x - 2 * t.y);
}

__global__ void fill_table(int k) {
    int r = threadIdx.y, c = threadIdx.x;
    table[r][c].x = k * (r + 1) + c;
    table[r][c].y = r - c;
}

int main() {
    const int n = 1000;
    float3 hflux[2];
    hflux[0].x = 1.0f; hflux[0].y = 2.0f; hflux[0].z = 3.0f;
    hflux[1].x = 4.0f; hflux[1].y = 5.0f; hflux[1].z = 6.0f;
    Coef hcoef[3] = {{2.0f, 0.5f}, {-1.0f, 0.25f}, {0.5f, -3.0f}};
    cudaMemcpyToSymbol(flux, hflux, sizeof(hflux));
    cudaMemcpyToSymbol(coef, hcoef, sizeof(hcoef));
    float* h_in = (float*)malloc(n * sizeof(float));
    float* h_out = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) h_in[i] = (float)(i % 13) - 6.0f;
    float *d_in, *d_out;
    cudaMalloc(&d_in, n * sizeof(float));
    cudaMalloc(&d_out, n * sizeof(float));
    cudaMemcpy(d_in, h_in, n * sizeof(float), cudaMemcpyHostToDevice);
    fill_table<<<1, dim3(3, 2)>>>(7);
    combine<<<(n + 127) / 128, 128>>>(d_in, d_out, n);
    cudaMemcpy(h_out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
    int2 htable[2][3];
    cudaMemcpyFromSymbol(htable, table, sizeof(htable));
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += h_out[i];
    printf("sum %.3f out[0] %.3f out[1] %.3f out[5] %.3f\n", sum, h_out[0], h_out[1], h_out[5]);
    printf("table[1][2] = (%d, %d)\n", htable[1][2].x, htable[1][2].y);
    cudaFree(d_in); cudaFree(d_out); free(h_in); free(h_out);
    return 0;
}
