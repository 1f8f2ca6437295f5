// backprop_layerforward: the forward pass of one fully connected layer, in the style of the
// Rodinia backprop benchmark's layerforward kernel (written afresh for polypy).
//
//   partial_sums[by][col] = sum_{ty < HEIGHT} input[by*HEIGHT + ty] * weights[by*HEIGHT + ty][col]
//
// i.e. each block (bx, by) multiplies a HEIGHT x WIDTH slab of the weight matrix by HEIGHT input
// units and reduces over the input units; the host (not here) adds the partial sums of all `by`.
// Launch with block (WIDTH, HEIGHT) and grid (hid / WIDTH, n_in / HEIGHT); weights is
// n_in x hid, row-major.
//
// Exercises the pattern from the Polygeist talk: a barrier that is unnecessary (the accesses
// around it do not intersect; the next barrier already orders input_node), a shared store
// immediately reloaded by the same thread (forwardable), then a log2 tree reduction over ty with
// a barrier per step.
#ifndef REAL
#define REAL float
#endif

#define WIDTH 16
#define HEIGHT 16

__global__ void backprop_layerforward(const REAL* input, const REAL* weights, REAL* partial_sums, int hid)
{
    __shared__ REAL input_node[HEIGHT];
    __shared__ REAL weight_matrix[HEIGHT][WIDTH];

    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int in_row = blockIdx.y * HEIGHT + ty;  // input unit handled by this row of threads
    int col = blockIdx.x * WIDTH + tx;      // hidden unit handled by this column of threads

    if (tx == 0)
        input_node[ty] = input[in_row];
    __syncthreads();  // unnecessary: nothing below reads input_node before the next barrier

    weight_matrix[ty][tx] = weights[in_row * hid + col];
    __syncthreads();

    // Reads back this thread's own store: the load can be forwarded from the store.
    weight_matrix[ty][tx] = weight_matrix[ty][tx] * input_node[ty];
    __syncthreads();

    // Tree reduction over ty: after the step with stride s, row ty (ty % 2s == 0) holds the sum
    // of rows ty .. ty + 2s - 1.
    for (int stride = 1; stride < HEIGHT; stride *= 2) {
        if (ty % (2 * stride) == 0)
            weight_matrix[ty][tx] += weight_matrix[ty + stride][tx];
        __syncthreads();
    }

    if (ty == 0)
        partial_sums[blockIdx.y * hid + col] = weight_matrix[0][tx];
}
