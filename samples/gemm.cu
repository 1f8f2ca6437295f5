// gemm: C = alpha * A B + beta * C for an ni x nk matrix A and an nk x nj matrix B, in the style
// of PolyBench's gemm (written afresh for polypy): the arrays are stored with the row lengths of
// the largest problem (the macros NK and NJ) while the loops run to the arguments ni, nj, nk.
// Exercises: row strides that are macros while the bounds are arguments -- a thread's element of
// C is its own exactly when nj <= NJ, which a gradient tests at run time (versioned adjoint) --
// and a serial k loop accumulating into global memory.
#ifndef REAL
#define REAL float
#endif

#ifndef NJ
#define NJ 64
#endif
#ifndef NK
#define NK 64
#endif

__global__ void gemm(int ni, int nj, int nk, REAL alpha, REAL beta, const REAL* a, const REAL* b, REAL* c)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < ni && j < nj) {
        c[i * NJ + j] *= beta;
        for (int k = 0; k < nk; k++)
            c[i * NJ + j] += alpha * a[i * NK + k] * b[k * NJ + j];
    }
}
