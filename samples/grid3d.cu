// grid3d: 3-D 7-point Laplacian on an nx x ny x nz grid (x fastest):
// out = inv_h2 * (sum of the 6 face neighbours - 6 u) at interior points; out = u on the boundary.
// Exercises: a 3-D grid of 3-D blocks (blockIdx.z / threadIdx.z / blockDim.z), a linearized
// 3-D index, guards in all three dimensions for sizes that are not multiples of the block.
#ifndef REAL
#define REAL float
#endif

__global__ void grid3d(const REAL* u, REAL* out, int nx, int ny, int nz, REAL inv_h2)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz) {
        int sy = nx;
        int sz = nx * ny;
        int c = z * sz + y * sy + x;
        bool interior = x > 0 && y > 0 && z > 0 && x < nx - 1 && y < ny - 1 && z < nz - 1;
        if (interior)
            out[c] = inv_h2 * (u[c - 1] + u[c + 1] + u[c - sy] + u[c + sy] + u[c - sz] + u[c + sz]
                               - (REAL)6 * u[c]);
        else
            out[c] = u[c];
    }
}
