// Records whose members are all integers in __constant__ and __device__ memory, with and without
// initializers (a variable without one is zero, as static storage is), set and read by the host
// with cudaMemcpyToSymbol / cudaMemcpyFromSymbol. tests/test_struct_memory.py checks its output.
#include <cstdio>

struct Pair { int a; int b; };
struct Nest { Pair p; int c[2]; };

__constant__ struct Common { int a; int b; } common;  // defined in the declaration, no initializer
__constant__ Pair pairs[3];
__constant__ Pair fixed[2] = {{1, 2}, {3, 4}};
__device__ Pair counter;
__device__ Nest nests[2];
__device__ Nest nest = {{5, 6}, {7, 8}};

__global__ void mix(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const Pair &q = pairs[i % 3];
        out[i] = common.a * i + common.b + q.a - q.b + fixed[i % 2].a * fixed[i % 2].b
                 + nest.p.a + nest.c[i % 2] + nests[i % 2].c[1] + nests[1 - i % 2].p.b;
    }
}

__global__ void store(void) {
    counter.a = 11;
    counter.b = common.a + 12;
    nests[1].p.b = 13;
    nests[0].c[1] = nest.p.b;
}

int main(void) {
    const int n = 10;
    Nest before[2];
    cudaMemcpyFromSymbol(before, nests, sizeof(before));
    printf("zero %d %d %d %d\n", before[0].p.a, before[0].c[1], before[1].p.b, before[1].c[0]);
    Common h = {3, 7};
    Pair hp[3] = {{10, 1}, {20, 2}, {30, 3}};
    cudaMemcpyToSymbol(common, &h, sizeof(h));
    cudaMemcpyToSymbol(pairs, hp, sizeof(hp));
    int *d_out;
    cudaMalloc(&d_out, n * sizeof(int));
    mix<<<2, 8>>>(d_out, n);
    store<<<1, 1>>>();
    mix<<<3, 4>>>(d_out + 0, 5);
    int out[n];
    cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost);
    Pair c;
    Nest after[2];
    cudaMemcpyFromSymbol(&c, counter, sizeof(c));
    cudaMemcpyFromSymbol(after, nests, sizeof(after));
    printf("out");
    for (int i = 0; i < n; i++) printf(" %d", out[i]);
    printf("\ncounter %d %d\n", c.a, c.b);
    printf("nests %d %d %d %d %d %d %d %d\n", after[0].p.a, after[0].p.b, after[0].c[0], after[0].c[1],
           after[1].p.a, after[1].p.b, after[1].c[0], after[1].c[1]);
    cudaFree(d_out);
    return 0;
}
