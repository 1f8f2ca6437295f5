// polypy's own test extension, written in the style of PyTorch's CUDA extension tutorial:
// y = a * x^2 + b elementwise, its backward, and a row sum (2-D grid, one row per blockIdx.y);
// then kernels over PyTorch's packed accessors: 1-D, 2-D and 3-D accessors, read and written,
// size() and stride(), an accessor's row kept in a local, an accessor passed to a device function,
// 32- and 64-bit index types, RestrictPtrTraits and DefaultPtrTraits.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>

#include <cuda.h>
#include <cuda_runtime.h>

namespace {
template <typename scalar_t>
__device__ __forceinline__ scalar_t square(scalar_t v) {
  return v * v;
}

template <typename scalar_t>
__global__ void square_affine_kernel(int64_t n, const scalar_t* __restrict__ x, scalar_t a, scalar_t b,
                                     scalar_t* __restrict__ y) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * square(x[i]) + b;
}

template <typename scalar_t>
__global__ void square_affine_backward_kernel(int64_t n, const scalar_t* __restrict__ x, scalar_t a,
                                              const scalar_t* __restrict__ grad_y, scalar_t* __restrict__ grad_x) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) grad_x[i] = 2 * a * x[i] * grad_y[i];
}

template <typename scalar_t>
__global__ void row_sum_kernel(int rows, int cols, const scalar_t* __restrict__ x, scalar_t* __restrict__ out) {
  __shared__ scalar_t partial[128];
  const int row = blockIdx.y;
  scalar_t acc = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += x[(int64_t)row * cols + c];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0 && row < rows) out[row] = partial[0];
}
}  // namespace

torch::Tensor square_affine_cuda(torch::Tensor x, double a, double b) {
  TORCH_CHECK(x.device().is_cuda(), "x must be a CUDA tensor");
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t n = xc.numel();
  const int threads = 256;
  const int blocks = (int)((n + threads - 1) / threads);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "square_affine_cuda", ([&] {
    square_affine_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
        n, xc.data_ptr<scalar_t>(), (scalar_t)a, (scalar_t)b, y.data_ptr<scalar_t>());
  }));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

torch::Tensor square_affine_backward_cuda(torch::Tensor grad_y, torch::Tensor x, double a) {
  const at::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto gy = grad_y.contiguous();
  auto grad_x = torch::empty_like(xc);
  const int64_t n = xc.numel();
  const int threads = 128;
  const dim3 blocks((n + threads - 1) / threads);
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "square_affine_backward_cuda", ([&] {
    square_affine_backward_kernel<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        n, xc.data_ptr<scalar_t>(), (scalar_t)a, gy.data_ptr<scalar_t>(), grad_x.data_ptr<scalar_t>());
  }));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad_x;
}

torch::Tensor row_sum_cuda(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 2, "x must be 2-D");
  auto xc = x.contiguous();
  auto out = torch::zeros({xc.size(0)}, xc.options());
  const dim3 blocks(1, xc.size(0));
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "row_sum_cuda", ([&] {
    row_sum_kernel<scalar_t><<<blocks, 128>>>((int)xc.size(0), (int)xc.size(1), xc.data_ptr<scalar_t>(),
                                              out.data_ptr<scalar_t>());
  }));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

namespace {
template <typename scalar_t>
__global__ void axpy_acc_kernel(scalar_t a, const torch::PackedTensorAccessor32<scalar_t, 1, torch::RestrictPtrTraits> x,
                                torch::PackedTensorAccessor32<scalar_t, 1, torch::RestrictPtrTraits> y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0)) y[i] += a * x[i];
}

// out[r][c] = x[r][c] * x[r][c] * w[c]; x may have any strides (a transposed tensor).
template <typename scalar_t>
__global__ void weighted_square_kernel(const at::PackedTensorAccessor64<scalar_t, 2> x,
                                       const at::PackedTensorAccessor64<scalar_t, 1> w,
                                       at::PackedTensorAccessor64<scalar_t, 2> out) {
  const int64_t r = blockIdx.y;
  for (int64_t c = threadIdx.x; c < x.size(1); c += blockDim.x) {
    const scalar_t v = x[r][c];
    out[r][c] = v * v * w[c];
  }
}

template <typename scalar_t>
__device__ scalar_t weight_of(const at::PackedTensorAccessor64<scalar_t, 1>& w, int64_t c) {
  return w[c];
}

// The backward of weighted_square for x: grad_x[r][c] = 2 x[r][c] w[c] grad_out[r][c]; a row of
// each accessor kept in a local, the weight read through a device function.
template <typename scalar_t>
__global__ void weighted_square_backward_kernel(const at::PackedTensorAccessor64<scalar_t, 2> x,
                                                const at::PackedTensorAccessor64<scalar_t, 1> w,
                                                const at::PackedTensorAccessor64<scalar_t, 2> grad_out,
                                                at::PackedTensorAccessor64<scalar_t, 2> grad_x) {
  const int64_t r = blockIdx.y;
  auto xr = x[r];
  auto gr = grad_out[r];
  auto out = grad_x[r];
  for (int64_t c = threadIdx.x; c < xr.size(0); c += blockDim.x) out[c] = 2 * xr[c] * weight_of(w, c) * gr[c];
}

// 3-D: out[b][i][j] = x[b][i][j] * (b + 1) - x[b][i][0], the last read through data() and the
// strides.
template <typename scalar_t>
__global__ void offsets_3d_kernel(torch::PackedTensorAccessor32<scalar_t, 3, torch::RestrictPtrTraits> x,
                                  torch::PackedTensorAccessor32<scalar_t, 3, torch::RestrictPtrTraits> out) {
  const int b = blockIdx.z, i = blockIdx.y;
  const int j = threadIdx.x;
  if (b < x.size(0) && i < x.size(1) && j < x.size(2)) {
    out[b][i][j] = x[b][i][j] * (b + 1) - x.data()[b * x.stride(0) + i * x.stride(1)];
  }
}
}  // namespace

torch::Tensor axpy_acc(torch::Tensor x, torch::Tensor y, double a) {
  TORCH_CHECK(x.dim() == 1 && x.sizes() == y.sizes(), "x and y: 1-D, same size");
  auto out = y.clone();
  const int n = x.size(0);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "axpy_acc", ([&] {
    axpy_acc_kernel<scalar_t><<<(n + 127) / 128, 128>>>(
        (scalar_t)a, x.packed_accessor32<scalar_t, 1, torch::RestrictPtrTraits>(),
        out.packed_accessor32<scalar_t, 1, torch::RestrictPtrTraits>());
  }));
  return out;
}

torch::Tensor weighted_square(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 1 && w.size(0) == x.size(1), "x: 2-D, w: its columns");
  auto out = torch::empty(x.sizes(), x.options());
  const dim3 blocks(1, x.size(0));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "weighted_square", ([&] {
    weighted_square_kernel<scalar_t><<<blocks, 64>>>(x.packed_accessor64<scalar_t, 2>(),
                                                     w.packed_accessor64<scalar_t, 1>(),
                                                     out.packed_accessor64<scalar_t, 2>());
  }));
  return out;
}

torch::Tensor weighted_square_backward(torch::Tensor grad_out, torch::Tensor x, torch::Tensor w) {
  auto grad_x = torch::empty(x.sizes(), x.options());
  const dim3 blocks(1, x.size(0));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "weighted_square_backward", ([&] {
    weighted_square_backward_kernel<scalar_t><<<blocks, 32>>>(
        x.packed_accessor64<scalar_t, 2>(), w.packed_accessor64<scalar_t, 1>(),
        grad_out.packed_accessor64<scalar_t, 2>(), grad_x.packed_accessor64<scalar_t, 2>());
  }));
  return grad_x;
}

torch::Tensor offsets_3d(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) <= 256, "x: 3-D, at most 256 in its last dimension");
  auto out = torch::empty(x.sizes(), x.options());
  const dim3 blocks(1, x.size(1), x.size(0));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "offsets_3d", ([&] {
    offsets_3d_kernel<scalar_t><<<blocks, 256>>>(x.packed_accessor32<scalar_t, 3, torch::RestrictPtrTraits>(),
                                                 out.packed_accessor32<scalar_t, 3, torch::RestrictPtrTraits>());
  }));
  return out;
}

TORCH_LIBRARY_IMPL(polypy_test, CUDA, m) {
  m.impl("square_affine", &square_affine_cuda);
  m.impl("square_affine_backward", &square_affine_backward_cuda);
}
