// Records of mixed member types in __constant__, __device__, __shared__ and local arrays: a
// params struct set with cudaMemcpyToSymbol, a brace-initialized __constant__ table, whole
// records copied to a __device__ array read back with cudaMemcpyFromSymbol.
#include <cstdio>
#include <cuda_runtime.h>

struct Params { int n; float alpha; bool flip; double beta; short tags[3]; };

__constant__ Params params;
__constant__ Params table[2] = {{1, 2.0f, true, 3.0, {4, 5, 6}}, {7, 8.0f, false, 9.0, {10, 11, 12}}};
__device__ Params results[4];

__global__ void mix(float* out) {
    int i = threadIdx.x;
    __shared__ Params sh[4];
    Params loc[2];
    sh[i].n = params.n + i;
    sh[i].alpha = 0.0f;
    sh[i].flip = i % 2 == 1;
    sh[i].beta = params.beta * i;
    sh[i].tags[0] = (short)i;
    sh[i].tags[1] = table[i % 2].tags[i % 3];
    sh[i].tags[2] = (short)(2 * i);
    loc[i % 2].alpha = table[1].alpha;
    loc[1 - i % 2].alpha = 0.5f;
    __syncthreads();
    float v = params.alpha * (float)sh[3 - i].n + (params.flip ? 1.0f : 0.0f) + (float)sh[3 - i].beta
              + (float)sh[3 - i].tags[1] + loc[0].alpha;
    out[i] = v;
    results[i] = sh[i];
    results[i].alpha = v;
}

int main() {
    Params h;
    h.n = 10; h.alpha = 0.25f; h.flip = true; h.beta = 1.5;
    h.tags[0] = h.tags[1] = h.tags[2] = 0;
    cudaMemcpyToSymbol(params, &h, sizeof(h));
    float* d;
    cudaMalloc(&d, 4 * sizeof(float));
    mix<<<1, 4>>>(d);
    float o[4];
    cudaMemcpy(o, d, sizeof(o), cudaMemcpyDeviceToHost);
    Params r[4];
    cudaMemcpyFromSymbol(r, results, sizeof(r));
    for (int i = 0; i < 4; i++)
        printf("%.3f n %d beta %.2f tags %d %d %d flip %d alpha %.3f\n", o[i], r[i].n, r[i].beta, r[i].tags[0],
               r[i].tags[1], r[i].tags[2], (int)r[i].flip, r[i].alpha);
    cudaFree(d);
    return 0;
}
