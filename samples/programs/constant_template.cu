// constant_template: evaluate a cubic polynomial p(x) = c0 + c1 x + c2 x^2 + c3 x^3 on n points
// (coefficients in __constant__ memory, set from the host) and reduce the values to a sum.
// The same templated kernel is instantiated for two block sizes; both totals must agree.
// Inputs come from a fixed 32-bit LCG.
// Exercises: __constant__ + cudaMemcpyToSymbol, `template <int BLOCK> __global__` launched as
// k<256><<<...>>> and k<128><<<...>>>, a shared tree reduction sized by the template parameter,
// atomicAdd into a device scalar, cudaEvent timing (never printed), cudaGetLastError /
// cudaGetErrorString, cudaDeviceSynchronize.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define NCOEF 4

__constant__ float c_coef[NCOEF];

template <int BLOCK>
__global__ void poly_reduce(const float* x, float* y, float* total, int n)
{
    __shared__ float buf[BLOCK];
    int tid = threadIdx.x;
    int i = blockIdx.x * BLOCK + tid;

    float v = 0.0f;
    if (i < n) {
        float t = x[i];
        v = ((c_coef[3] * t + c_coef[2]) * t + c_coef[1]) * t + c_coef[0];  // Horner
        y[i] = v;
    }
    buf[tid] = v;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s)
            buf[tid] += buf[tid + s];
        __syncthreads();
    }
    if (tid == 0)
        atomicAdd(total, buf[0]);
}

int main()
{
    const int n = 50000;
    const float h_coef[NCOEF] = {1.0f, 0.5f, 0.25f, 0.125f};

    float* h_x = (float*)malloc(n * sizeof(float));
    float* h_y = (float*)malloc(n * sizeof(float));
    unsigned int state = 12345u;
    for (int i = 0; i < n; ++i) {
        state = state * 1664525u + 1013904223u;
        h_x[i] = (float)(state >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f;  // [-1, 1)
    }

    float *d_x, *d_y, *d_total;
    cudaMalloc((void**)&d_x, n * sizeof(float));
    cudaMalloc((void**)&d_y, n * sizeof(float));
    cudaMalloc((void**)&d_total, 2 * sizeof(float));
    cudaMemcpy(d_x, h_x, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpyToSymbol(c_coef, h_coef, sizeof(h_coef));
    cudaMemset(d_total, 0, 2 * sizeof(float));

    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    poly_reduce<256><<<dim3((n + 255) / 256), dim3(256)>>>(d_x, d_y, d_total, n);
    poly_reduce<128><<<dim3((n + 127) / 128), dim3(128)>>>(d_x, d_y, d_total + 1, n);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);  // measured, deliberately not printed

    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        printf("CUDA error: %s\n", cudaGetErrorString(err));
        return 1;
    }
    cudaDeviceSynchronize();

    float h_total[2];
    cudaMemcpy(h_total, d_total, 2 * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h_y, d_y, n * sizeof(float), cudaMemcpyDeviceToHost);

    double host_sum = 0.0;
    for (int i = 0; i < n; ++i)
        host_sum += h_y[i];
    printf("n = %d\n", n);
    printf("total<256> = %.2f\n", h_total[0]);
    printf("total<128> = %.2f\n", h_total[1]);
    printf("host sum = %.2f\n", host_sum);
    printf("y[0] = %.6f, y[%d] = %.6f\n", h_y[0], n - 1, h_y[n - 1]);

    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(d_x);
    cudaFree(d_y);
    cudaFree(d_total);
    free(h_x);
    free(h_y);
    return 0;
}
