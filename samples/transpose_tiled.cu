// transpose_tiled: out (cols x rows) = transpose of in (rows x cols), row-major floats.
// Exercises: a 2-D grid, a block of (TILE_DIM, BLOCK_ROWS) threads where each thread copies
// TILE_DIM / BLOCK_ROWS elements in a loop, a padded __shared__ tile (TILE_DIM + 1 columns, to
// avoid bank conflicts) and guards for sizes that are not multiples of the tile.
// Launch with block (32, 8) and grid (ceil(cols / 32), ceil(rows / 32)).
#define TILE_DIM 32
#define BLOCK_ROWS 8

__global__ void transpose_tiled(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];

    // Read a TILE_DIM x TILE_DIM tile of `in` with coalesced loads.
    int x = blockIdx.x * TILE_DIM + threadIdx.x;  // column of in
    int y = blockIdx.y * TILE_DIM + threadIdx.y;  // row of in
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];

    __syncthreads();

    // Write it transposed, again with coalesced stores: the block's tile lands at the mirrored
    // position, and each thread reads a column of the shared tile.
    x = blockIdx.y * TILE_DIM + threadIdx.x;  // column of out (= row of in)
    y = blockIdx.x * TILE_DIM + threadIdx.y;  // row of out (= column of in)
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < rows && y + j < cols)
            out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
