// polypy's own test extension for c10::BFloat16 (at::BFloat16) in kernels, and the corners of
// c10::Half that half_ops.cu leaves out. bf16_mix (AT_DISPATCH_FLOATING_TYPES_AND2(Half, BFloat16)):
// scalar_t * scalar_t, + scalar_t, += of a scalar_t, unary minus, / scalar_t, scalar_t * float (a
// float), a comparison, scalar_t - int and scalar_t * int, a scalar_t made from a double and an
// int64_t, std::numeric_limits<scalar_t>, __ldg of a const scalar_t*, a __shared__ scalar_t array,
// a 1-D packed accessor of scalar_t; row_sum (AT_DISPATCH_FLOATING_TYPES_AND(BFloat16)): a block
// reduction in an at::acc_type accumulator (float for BFloat16), the sum made a scalar_t;
// bucket_sum (AT_DISPATCH_FLOATING_TYPES): gpuAtomicAdd and gpuAtomicAddNoReturn of ATen/cuda/Atomic.cuh.
#include <torch/extension.h>
#include <ATen/AccumulateType.h>
#include <ATen/cuda/Atomic.cuh>
#include <ATen/cuda/CUDAContext.h>
#include <limits>

namespace {
template <typename scalar_t>
__global__ void bf16_mix_kernel(int n, const torch::PackedTensorAccessor32<scalar_t, 1, torch::RestrictPtrTraits> x,
                                const scalar_t* __restrict__ w, scalar_t a,
                                double d, int64_t k, scalar_t* __restrict__ y, float* __restrict__ f,
                                scalar_t* __restrict__ lim) {
  __shared__ scalar_t tile[128];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? __ldg(&w[i]) : scalar_t(0);
  __syncthreads();
  if (i < n) {
    scalar_t v = x[i] * a + tile[threadIdx.x];
    v += (scalar_t)0.5;
    v = -v / scalar_t(3.0);
    f[i] = v * 1.5f;
    v = v > (scalar_t)0 ? v - 1 : v * 2;
    y[i] = v + static_cast<scalar_t>(d) * static_cast<scalar_t>(k);
  }
  if (i == 0) {
    lim[0] = std::numeric_limits<scalar_t>::max();
    lim[1] = std::numeric_limits<scalar_t>::lowest();
    lim[2] = std::numeric_limits<scalar_t>::min();
    lim[3] = std::numeric_limits<scalar_t>::epsilon();
    lim[4] = std::numeric_limits<scalar_t>::infinity();
    lim[5] = std::numeric_limits<scalar_t>::quiet_NaN();
    lim[6] = std::numeric_limits<scalar_t>::denorm_min();
  }
}

template <typename scalar_t>
__global__ void row_sum_kernel(int rows, int cols, const scalar_t* __restrict__ x, scalar_t* __restrict__ out) {
  using acc_t = at::acc_type<scalar_t, true>;
  __shared__ acc_t partial[128];
  const int row = blockIdx.y;
  acc_t acc = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += static_cast<acc_t>(x[(int64_t)row * cols + c]);
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0 && row < rows) out[row] = static_cast<scalar_t>(partial[0]);
}

template <typename scalar_t>
__global__ void bucket_sum_kernel(int n, const scalar_t* __restrict__ x, scalar_t* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    gpuAtomicAdd(&out[i % 4], x[i]);
    gpuAtomicAddNoReturn(&out[4], x[i]);
  }
}
}  // namespace

std::vector<torch::Tensor> bf16_mix(torch::Tensor x, torch::Tensor w, double a, double d, int64_t k) {
  auto y = torch::empty_like(x);
  auto f = torch::empty(x.sizes(), x.options().dtype(torch::kFloat));
  auto lim = torch::empty({7}, x.options());
  const int n = x.numel();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(), "bf16_mix", ([&] {
    bf16_mix_kernel<scalar_t><<<(n + 127) / 128, 128>>>(n, x.packed_accessor32<scalar_t, 1, torch::RestrictPtrTraits>(),
                                                        w.data_ptr<scalar_t>(),
                                                        (scalar_t)a, d, k, y.data_ptr<scalar_t>(),
                                                        f.data_ptr<float>(), lim.data_ptr<scalar_t>());
  }));
  return {y, f, lim};
}

torch::Tensor row_sum(torch::Tensor x) {
  auto xc = x.contiguous();
  auto out = torch::empty({xc.size(0)}, xc.options());
  const dim3 blocks(1, xc.size(0));
  AT_DISPATCH_FLOATING_TYPES_AND(at::ScalarType::BFloat16, xc.scalar_type(), "row_sum", ([&] {
    row_sum_kernel<scalar_t><<<blocks, 128>>>((int)xc.size(0), (int)xc.size(1), xc.data_ptr<scalar_t>(),
                                              out.data_ptr<scalar_t>());
  }));
  return out;
}

torch::Tensor bucket_sum(torch::Tensor x) {
  auto out = torch::zeros({5}, x.options());
  const int n = x.numel();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "bucket_sum", ([&] {
    bucket_sum_kernel<scalar_t><<<(n + 127) / 128, 128>>>(n, x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>());
  }));
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("bf16_mix", &bf16_mix, "mix");
  m.def("row_sum", &row_sum, "sum");
  m.def("bucket_sum", &bucket_sum, "atomic sums");
}
