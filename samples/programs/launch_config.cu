// launch_config: the same kernels launched with block shapes spelled every way CUDA programs
// spell them. polypy evaluates the shapes it can at compile time (frontend/launch_shapes.py) and
// compiles versions specialized for them; `polypy translate --report` says, per launch, which
// version runs and why. Shapes it cannot know (a dim3 changed in an `if`, or by `*=` in a loop)
// run the generic version -- and must still give the right answer for the shape actually used.
#include <cstdio>
#include <cuda_runtime.h>

#define BLOCK_SIZE 16
#ifndef ROW_BLOCK
#define ROW_BLOCK 128
#endif
#define N 66000
#define W 1024
#define H 64

const int kThreads = 64;
constexpr int kWide = 256;

// y = a x + y: one global index per thread (blocks coarsen along x).
__global__ void axpy(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

// out = 2 in + row, over a 2-D grid of 2-D blocks.
__global__ void scale2d(const float* in, float* out, int w, int h)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (c < w && r < h)
        out[r * w + c] = 2.0f * in[r * w + c] + (float)r;
}

// Per block: the sum of its elements (a tree in shared memory) and its shape.
__global__ void block_sums(const float* x, float* sums, int* shape, int n)
{
    __shared__ float s[256];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride)
            s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) {
        sums[blockIdx.x] = s[0];
        shape[blockIdx.x] = blockDim.x;
    }
}

static double total(const float* d, int n)
{
    static float h[N];
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    double s = 0.0;
    for (int i = 0; i < n; ++i)
        s += h[i];
    return s;
}

static void report_sums(const char* what, const float* d_sums, const int* d_shape, int blocks)
{
    static float sums[N];
    static int shape[N];
    cudaMemcpy(sums, d_sums, blocks * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(shape, d_shape, blocks * sizeof(int), cudaMemcpyDeviceToHost);
    double s = 0.0;
    for (int b = 0; b < blocks; ++b)
        s += sums[b];
    printf("%s: %d blocks of %d, sums[1] = %.1f, total = %.1f\n", what, blocks, shape[0], sums[1], s);
}

int main()
{
    static float hx[N], hy[N];
    for (int i = 0; i < N; ++i) {
        hx[i] = (float)(i % 5);
        hy[i] = (float)(i % 3);
    }
    float *x, *y, *in2, *out2, *sums;
    int* shape;
    cudaMalloc((void**)&x, N * sizeof(float));
    cudaMalloc((void**)&y, N * sizeof(float));
    cudaMalloc((void**)&in2, W * H * sizeof(float));
    cudaMalloc((void**)&out2, W * H * sizeof(float));
    cudaMalloc((void**)&sums, N * sizeof(float));
    cudaMalloc((void**)&shape, N * sizeof(int));
    cudaMemcpy(x, hx, N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(y, hy, N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(in2, hx, W * H * sizeof(float), cudaMemcpyHostToDevice);

    // A literal, a const int, a constexpr, a macro.
    axpy<<<(N + 255) / 256, 256>>>(1.0f, x, y, N);
    axpy<<<(N + kThreads - 1) / kThreads, kThreads>>>(2.0f, x, y, N);
    axpy<<<(N + kWide - 1) / kWide, kWide>>>(1.0f, x, y, N);
    axpy<<<(N + ROW_BLOCK - 1) / ROW_BLOCK, ROW_BLOCK>>>(1.0f, x, y, N);
    printf("axpy: total = %.1f\n", total(y, N));

    // dim3 variables: from macros; from an int set once; built member by member; reassigned.
    dim3 threads(BLOCK_SIZE, BLOCK_SIZE);
    dim3 grid((W + BLOCK_SIZE - 1) / BLOCK_SIZE, (H + BLOCK_SIZE - 1) / BLOCK_SIZE);
    scale2d<<<grid, threads>>>(in2, out2, W, H);
    printf("scale2d 16x16: total = %.1f\n", total(out2, W * H));

    int bs;
    bs = 32;
    dim3 b1(bs);
    axpy<<<(N + bs - 1) / bs, b1>>>(-1.0f, x, y, N);

    dim3 t3;
    t3.x = 8;
    t3.y = 4;
    dim3 g3((W + 7) / 8, (H + 3) / 4);
    scale2d<<<g3, t3>>>(in2, out2, W, H);
    printf("scale2d 8x4: total = %.1f\n", total(out2, W * H));

    dim3 b4 = dim3(64);
    b4 = dim3(kWide / 2);
    axpy<<<(N + b4.x - 1) / b4.x, b4>>>(1.0f, x, y, N);
    printf("axpy: total = %.1f\n", total(y, N));

    // Shapes polypy cannot know: changed in an `if` (on a value computed at run time), and
    // doubled after each launch of a loop. These run the generic version.
    dim3 v(64);
    if (total(x, N) > 100.0)
        v.x = 128;
    block_sums<<<(N + v.x - 1) / v.x, v>>>(x, sums, shape, N);
    report_sums("if", sums, shape, (N + v.x - 1) / v.x);

    dim3 lb(32);
    for (int k = 0; k < 3; ++k) {
        block_sums<<<(N + lb.x - 1) / lb.x, lb>>>(x, sums, shape, N);
        report_sums("loop", sums, shape, (N + lb.x - 1) / lb.x);
        lb.x *= 2;
    }

    cudaFree(x);
    cudaFree(y);
    cudaFree(in2);
    cudaFree(out2);
    cudaFree(sums);
    cudaFree(shape);
    return 0;
}
