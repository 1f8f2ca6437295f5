// A `float**` kernel parameter (Rodinia leukocyte's `float **IMGVF_array`): a device array of
// pointers to the rows of one allocation, each block working on its row in place.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void rows_sum(float** rows, const int* lens, float* out) {
    int r = blockIdx.x;
    float* row = rows[r];
    float s = 0.0f;
    for (int j = threadIdx.x; j < lens[r]; j += blockDim.x) {
        s += row[j];
        row[j] *= 2.0f;
    }
    atomicAdd(&out[r], s);
}

int main() {
    const int nr = 5, total = 100;
    int hl[nr] = {10, 30, 5, 40, 15};
    float* h = (float*)malloc(total * sizeof(float));
    for (int i = 0; i < total; i++) h[i] = (float)(i % 7);
    float *d_all, *d_out;
    float** d_rows;
    int* d_lens;
    cudaMalloc((void**)&d_all, total * sizeof(float));
    cudaMalloc((void**)&d_rows, nr * sizeof(float*));
    cudaMalloc((void**)&d_lens, nr * sizeof(int));
    cudaMalloc((void**)&d_out, nr * sizeof(float));
    cudaMemcpy(d_all, h, total * sizeof(float), cudaMemcpyHostToDevice);
    float* hrows[nr];
    int off = 0;
    for (int r = 0; r < nr; r++) { hrows[r] = d_all + off; off += hl[r]; }
    cudaMemcpy(d_rows, hrows, nr * sizeof(float*), cudaMemcpyHostToDevice);
    cudaMemcpy(d_lens, hl, nr * sizeof(int), cudaMemcpyHostToDevice);
    cudaMemset(d_out, 0, nr * sizeof(float));
    rows_sum<<<nr, 8>>>(d_rows, d_lens, d_out);
    float out[nr];
    cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost);
    cudaMemcpy(h, d_all, total * sizeof(float), cudaMemcpyDeviceToHost);
    double t = 0;
    for (int i = 0; i < total; i++) t += h[i];
    printf("sums %.1f %.1f %.1f %.1f %.1f doubled %.1f\n", out[0], out[1], out[2], out[3], out[4], t);
    return 0;
}
