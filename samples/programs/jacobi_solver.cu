// jacobi_solver: Laplace's equation on an NX x NY grid by Jacobi iteration, a fixed number of
// sweeps. The top edge is held at 1, the other edges at 0; the interior starts at 0.
// Exercises: cudaMemset of both buffers, an initialization kernel, a host loop of launches that
// swaps two device pointers between sweeps (std::swap), a 2-D grid of 2-D blocks with a
// partial last block in both dimensions, a final copy back and host-side checksums.
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <cuda_runtime.h>

#define NX 100
#define NY 70
#define ITERS 200

// Set the fixed boundary values (top row = 1; the rest of the boundary is already 0).
__global__ void set_boundary(float* u, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x < nx)
        u[(ny - 1) * nx + x] = 1.0f;
}

// One sweep: interior points of `dst` get the average of their neighbours in `src`; boundary
// points are not written (both buffers hold the same boundary).
__global__ void sweep(const float* src, float* dst, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x > 0 && y > 0 && x < nx - 1 && y < ny - 1) {
        int c = y * nx + x;
        dst[c] = 0.25f * (src[c - 1] + src[c + 1] + src[c - nx] + src[c + nx]);
    }
}

int main()
{
    const int nx = NX, ny = NY;
    size_t bytes = (size_t)nx * ny * sizeof(float);

    float *d_a, *d_b;
    cudaMalloc((void**)&d_a, bytes);
    cudaMalloc((void**)&d_b, bytes);
    cudaMemset(d_a, 0, bytes);
    cudaMemset(d_b, 0, bytes);
    set_boundary<<<(nx + 127) / 128, 128>>>(d_a, nx, ny);
    set_boundary<<<(nx + 127) / 128, 128>>>(d_b, nx, ny);

    dim3 block(16, 16);
    dim3 grid((nx + block.x - 1) / block.x, (ny + block.y - 1) / block.y);
    for (int it = 0; it < ITERS; ++it) {
        sweep<<<grid, block>>>(d_a, d_b, nx, ny);
        std::swap(d_a, d_b);  // d_a always holds the latest iterate
    }

    float* h_u = (float*)malloc(bytes);
    cudaMemcpy(h_u, d_a, bytes, cudaMemcpyDeviceToHost);

    double sum = 0.0;
    for (int i = 0; i < nx * ny; ++i)
        sum += h_u[i];
    printf("jacobi %dx%d, %d iterations\n", nx, ny, ITERS);
    printf("sum = %.4f\n", sum);
    printf("center = %.6e\n", h_u[(ny / 2) * nx + nx / 2]);
    printf("below top = %.6f\n", h_u[(ny - 2) * nx + nx / 2]);

    cudaFree(d_a);
    cudaFree(d_b);
    free(h_u);
    return 0;
}
