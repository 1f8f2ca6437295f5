// polypy's own test extension, written in the style of PyTorch's CUDA extension tutorial:
// y = a * x^2 + b elementwise, its backward, and a row sum (2-D grid, one row per blockIdx.y).
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

TORCH_LIBRARY_IMPL(polypy_test, CUDA, m) {
  m.impl("square_affine", &square_affine_cuda);
  m.impl("square_affine_backward", &square_affine_backward_cuda);
}
