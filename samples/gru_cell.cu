// gru_cell: the element-wise part of a GRU cell for a batch of `batch` rows of `hidden` units.
// xg and hg are batch x (3 * hidden): the input and recurrent pre-activations of the update (z),
// reset (r) and candidate (c) gates, in that order; h is the previous state.
//
//   z = sigmoid(xg_z + hg_z),  r = sigmoid(xg_r + hg_r),  c = tanh(xg_c + r * hg_c)
//   h_new = (1 - z) * c + z * h
//
// Exercises: a __device__ helper (sigmoid via exp), tanh, a 2-D index (unit, batch row) on a
// 2-D grid with guards, several active inputs.
#ifndef REAL
#define REAL float
#endif

__device__ REAL sigmoid(REAL v)
{
    return (REAL)1 / ((REAL)1 + exp(-v));
}

__global__ void gru_cell(const REAL* xg, const REAL* hg, const REAL* h, REAL* h_new, int batch, int hidden)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;  // hidden unit
    int b = blockIdx.y * blockDim.y + threadIdx.y;  // batch row
    if (j < hidden && b < batch) {
        int g = b * 3 * hidden + j;
        REAL z = sigmoid(xg[g] + hg[g]);
        REAL r = sigmoid(xg[g + hidden] + hg[g + hidden]);
        REAL c = tanh(xg[g + 2 * hidden] + r * hg[g + 2 * hidden]);
        int o = b * hidden + j;
        h_new[o] = ((REAL)1 - z) * c + z * h[o];
    }
}
