// vecadd_saxpy: a two-kernel chain on the device.
//   c = a + b          (vecadd)
//   y = alpha * c + y  (saxpy, reading vecadd's output without a copy back in between)
// Inputs are simple formulas of the index; the program prints sums computed on the host in double.
// Exercises: cudaMalloc / cudaMemcpy both ways / cudaFree, dim3 launches with a partial last
// block, two launches on the default stream with a data dependence, printf of results.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void vecadd(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

__global__ void saxpy(int n, float alpha, const float* x, float* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = alpha * x[i] + y[i];
}

int main()
{
    const int n = 100000;
    const float alpha = 2.0f;
    size_t bytes = n * sizeof(float);

    float* h_a = (float*)malloc(bytes);
    float* h_b = (float*)malloc(bytes);
    float* h_c = (float*)malloc(bytes);
    float* h_y = (float*)malloc(bytes);
    for (int i = 0; i < n; ++i) {
        h_a[i] = (float)(i % 100) * 0.01f;
        h_b[i] = (float)((i * 7) % 13) * 0.5f;
        h_y[i] = 1.0f - (float)(i % 5) * 0.25f;
    }

    float *d_a, *d_b, *d_c, *d_y;
    cudaMalloc((void**)&d_a, bytes);
    cudaMalloc((void**)&d_b, bytes);
    cudaMalloc((void**)&d_c, bytes);
    cudaMalloc((void**)&d_y, bytes);
    cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_b, h_b, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_y, h_y, bytes, cudaMemcpyHostToDevice);

    dim3 block(256);
    dim3 grid((n + block.x - 1) / block.x);
    vecadd<<<grid, block>>>(d_a, d_b, d_c, n);
    saxpy<<<grid, block>>>(n, alpha, d_c, d_y);

    cudaMemcpy(h_c, d_c, bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_y, d_y, bytes, cudaMemcpyDeviceToHost);

    double sum_c = 0.0, sum_y = 0.0;
    for (int i = 0; i < n; ++i) {
        sum_c += h_c[i];
        sum_y += h_y[i];
    }
    printf("n = %d, blocks = %d\n", n, (int)grid.x);
    printf("sum(c) = %.4f\n", sum_c);
    printf("sum(y) = %.4f\n", sum_y);
    printf("y[0] = %.5f, y[%d] = %.5f, y[%d] = %.5f\n", h_y[0], n / 2 + 3, h_y[n / 2 + 3], n - 1, h_y[n - 1]);

    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_c);
    cudaFree(d_y);
    free(h_a);
    free(h_b);
    free(h_c);
    free(h_y);
    return 0;
}
