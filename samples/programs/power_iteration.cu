// power_iteration: the dominant eigenvalue of a symmetric N x N matrix by power iteration.
// Each iteration: w = A v (one block per row, shared reduction), |w|^2 accumulated with atomicAdd
// into a device scalar that is cleared with cudaMemset, the norm copied back to the host, and
// v = w / |w| by a scale kernel that takes the host-computed factor. A fixed iteration count
// keeps the output deterministic. The matrix is A[i][j] = 1 / (1 + |i - j|) + (i == j ? 2 : 0).
// Exercises: a host loop that reads a device value back every iteration and feeds it to the next
// launch, a struct passed by value to a kernel, cudaMemset inside the loop.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define N 300
#define ROW_BLOCK 128
#define ITERS 30

struct Scale {
    float factor;
    int n;
};

__global__ void matvec_norm2(const float* A, const float* v, float* w, float* norm2, int n)
{
    __shared__ float part[ROW_BLOCK];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    float acc = 0.0f;
    for (int j = tid; j < n; j += ROW_BLOCK)
        acc += A[row * n + j] * v[j];
    part[tid] = acc;
    __syncthreads();
    for (int s = ROW_BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s)
            part[tid] += part[tid + s];
        __syncthreads();
    }
    if (tid == 0) {
        w[row] = part[0];
        atomicAdd(norm2, part[0] * part[0]);
    }
}

__global__ void scale(Scale p, const float* w, float* v)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n)
        v[i] = p.factor * w[i];
}

int main()
{
    const int n = N;
    float* h_A = (float*)malloc(n * n * sizeof(float));
    float* h_v = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j)
            h_A[i * n + j] = 1.0f / (1.0f + (float)abs(i - j)) + (i == j ? 2.0f : 0.0f);
        h_v[i] = 1.0f;
    }

    float *d_A, *d_v, *d_w, *d_norm2;
    cudaMalloc((void**)&d_A, n * n * sizeof(float));
    cudaMalloc((void**)&d_v, n * sizeof(float));
    cudaMalloc((void**)&d_w, n * sizeof(float));
    cudaMalloc((void**)&d_norm2, sizeof(float));
    cudaMemcpy(d_A, h_A, n * n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_v, h_v, n * sizeof(float), cudaMemcpyHostToDevice);

    float lambda = 0.0f;
    for (int it = 0; it < ITERS; ++it) {
        cudaMemset(d_norm2, 0, sizeof(float));
        matvec_norm2<<<dim3(n), dim3(ROW_BLOCK)>>>(d_A, d_v, d_w, d_norm2, n);
        float norm2 = 0.0f;
        cudaMemcpy(&norm2, d_norm2, sizeof(float), cudaMemcpyDeviceToHost);
        float norm = sqrtf(norm2);
        lambda = norm;  // |A v| with |v| = 1 (from the second iteration on)
        Scale p;
        p.factor = 1.0f / norm;
        p.n = n;
        scale<<<dim3((n + 127) / 128), dim3(128)>>>(p, d_w, d_v);
        if (it == 0 || it == 9)
            printf("iteration %d: |Av| = %.4f\n", it + 1, norm);
    }

    cudaMemcpy(h_v, d_v, n * sizeof(float), cudaMemcpyDeviceToHost);
    double vsum = 0.0;
    for (int i = 0; i < n; ++i)
        vsum += h_v[i];
    printf("lambda = %.4f\n", lambda);
    printf("sum(v) = %.4f, v[0] = %.6e, v[%d] = %.6e\n", vsum, h_v[0], n / 2, h_v[n / 2]);

    cudaFree(d_A);
    cudaFree(d_v);
    cudaFree(d_w);
    cudaFree(d_norm2);
    free(h_A);
    free(h_v);
    return 0;
}
