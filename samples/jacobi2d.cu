// jacobi2d: one out-of-place 5-point Jacobi sweep on an nx x ny grid (row-major, x fastest):
// interior points get the average of their four neighbours, boundary points are copied.
// Exercises: a 2-D grid of 2-D blocks, guards for sizes that are not multiples of the block,
// an early `return` for out-of-range threads, neighbour loads.
#ifndef REAL
#define REAL float
#endif

__global__ void jacobi2d(const REAL* in, REAL* out, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny)
        return;

    int c = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
        out[c] = in[c];
    else
        out[c] = (REAL)0.25 * (in[c - 1] + in[c + 1] + in[c - nx] + in[c + nx]);
}
