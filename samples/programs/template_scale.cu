// template_scale: out[i] = alpha * (in[i] - mean of i's tile), where a tile is the BLOCK
// consecutive elements handled by one block (the last tile may be partial: its mean is over the
// elements that exist). One kernel template, two instantiations launched from the host:
// template_scale<128, float> on float data and template_scale<64, double> on double data.
// Exercises: a `template <int BLOCK, typename T>` kernel whose template parameters size a
// __shared__ array, type its locals and bound an unrolled reduction loop (`#pragma unroll`);
// instantiation through launches `k<128, float><<<...>>>`; T(0) / T(count) functional casts.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

template <int BLOCK, typename T>
__global__ void template_scale(const T* in, T* out, T alpha, int n)
{
    __shared__ T buf[BLOCK];

    int tid = threadIdx.x;
    int i = blockIdx.x * BLOCK + tid;
    T v = (i < n) ? in[i] : T(0);
    buf[tid] = v;
    __syncthreads();

#pragma unroll
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s)
            buf[tid] += buf[tid + s];
        __syncthreads();
    }

    int count = min(BLOCK, n - (int)blockIdx.x * BLOCK);
    T mean = buf[0] / T(count);
    if (i < n)
        out[i] = alpha * (v - mean);
}

// Sum of squares and the value of one element, computed on the host in double. (The plain sum
// of the outputs is zero up to rounding by construction, so it would make a poor checksum.)
template <typename T>
static void report(const char* label, const T* h, int n)
{
    double sq = 0.0;
    for (int i = 0; i < n; ++i)
        sq += (double)h[i] * (double)h[i];
    printf("%s: n = %d, sum of squares = %.5f, out[1] = %.6f, out[n-1] = %.6f\n",
           label, n, sq, (double)h[1], (double)h[n - 1]);
}

int main()
{
    const int nf = 1000;  // 7 full tiles of 128 and a partial tile of 104
    const int nd = 333;   // 5 full tiles of 64 and a partial tile of 13

    float* hf_in = (float*)malloc(nf * sizeof(float));
    float* hf_out = (float*)malloc(nf * sizeof(float));
    double* hd_in = (double*)malloc(nd * sizeof(double));
    double* hd_out = (double*)malloc(nd * sizeof(double));
    for (int i = 0; i < nf; ++i)
        hf_in[i] = (float)((i * 37) % 101) * 0.03f;
    for (int i = 0; i < nd; ++i)
        hd_in[i] = sin(0.1 * i) + 0.001 * i;

    float *df_in, *df_out;
    double *dd_in, *dd_out;
    cudaMalloc((void**)&df_in, nf * sizeof(float));
    cudaMalloc((void**)&df_out, nf * sizeof(float));
    cudaMalloc((void**)&dd_in, nd * sizeof(double));
    cudaMalloc((void**)&dd_out, nd * sizeof(double));
    cudaMemcpy(df_in, hf_in, nf * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dd_in, hd_in, nd * sizeof(double), cudaMemcpyHostToDevice);

    template_scale<128, float><<<dim3((nf + 127) / 128), dim3(128)>>>(df_in, df_out, 0.5f, nf);
    template_scale<64, double><<<dim3((nd + 63) / 64), dim3(64)>>>(dd_in, dd_out, 2.0, nd);

    cudaMemcpy(hf_out, df_out, nf * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(hd_out, dd_out, nd * sizeof(double), cudaMemcpyDeviceToHost);
    report("float<128>", hf_out, nf);
    report("double<64>", hd_out, nd);

    cudaFree(df_in);
    cudaFree(df_out);
    cudaFree(dd_in);
    cudaFree(dd_out);
    free(hf_in);
    free(hf_out);
    free(hd_in);
    free(hd_out);
    return 0;
}
