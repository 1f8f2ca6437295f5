// spmv_csr: y = A x for a sparse nrows x ncols matrix A in CSR form (row_ptr, col_idx, vals);
// one thread per row ("scalar CSR").
// Exercises: a loop whose bounds are loaded from memory (row_ptr[row] .. row_ptr[row + 1]),
// an indirect gather x[col_idx[k]] (non-affine access), a guard. Its gradient with respect to x
// scatters to data-dependent locations, so adjoint accumulation must be atomic.
#ifndef REAL
#define REAL float
#endif

__global__ void spmv_csr(int nrows, const int* row_ptr, const int* col_idx, const REAL* vals,
                         const REAL* x, REAL* y)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < nrows) {
        REAL dot = 0;
        for (int k = row_ptr[row]; k < row_ptr[row + 1]; ++k)
            dot += vals[k] * x[col_idx[k]];
        y[row] = dot;
    }
}
