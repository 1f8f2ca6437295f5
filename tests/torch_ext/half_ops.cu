// polypy's own test extension for c10::Half (at::Half) in kernels: every kernel is dispatched with
// AT_DISPATCH_FLOATING_TYPES_AND_HALF. half_mix: Half * Half, Half + Half, += of a Half, unary
// minus, Half / Half, Half * float (a float), a comparison, Half - int and Half * int, through a
// 1-D packed accessor and plain pointers; row_mean: a block reduction in an at::acc_type
// accumulator (float for Half), the mean made a scalar_t.
#include <torch/extension.h>
#include <ATen/AccumulateType.h>
#include <ATen/cuda/CUDAContext.h>

namespace {
template <typename scalar_t>
__global__ void half_mix_kernel(const torch::PackedTensorAccessor32<scalar_t, 1, torch::RestrictPtrTraits> x,
                                const scalar_t* __restrict__ w, scalar_t a, scalar_t* __restrict__ y,
                                float* __restrict__ f) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < x.size(0)) {
    scalar_t v = x[i] * a + w[i];
    v += (scalar_t)0.5;
    v = -v / scalar_t(3.0);
    f[i] = v * 1.5f;
    y[i] = v > (scalar_t)0 ? v - 1 : v * 2;
  }
}

template <typename scalar_t>
__global__ void row_mean_kernel(int rows, int cols, const scalar_t* __restrict__ x, scalar_t* __restrict__ out) {
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
  if (threadIdx.x == 0 && row < rows) out[row] = static_cast<scalar_t>(partial[0] / cols);
}
}  // namespace

std::vector<torch::Tensor> half_mix(torch::Tensor x, torch::Tensor w, double a) {
  auto y = torch::empty_like(x);
  auto f = torch::empty(x.sizes(), x.options().dtype(torch::kFloat));
  const int n = x.numel();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "half_mix", ([&] {
    half_mix_kernel<scalar_t><<<(n + 127) / 128, 128>>>(
        x.packed_accessor32<scalar_t, 1, torch::RestrictPtrTraits>(), w.data_ptr<scalar_t>(), (scalar_t)a,
        y.data_ptr<scalar_t>(), f.data_ptr<float>());
  }));
  return {y, f};
}

torch::Tensor row_mean(torch::Tensor x) {
  auto xc = x.contiguous();
  auto out = torch::empty({xc.size(0)}, xc.options());
  const dim3 blocks(1, xc.size(0));
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(xc.scalar_type(), "row_mean", ([&] {
    row_mean_kernel<scalar_t><<<blocks, 128>>>((int)xc.size(0), (int)xc.size(1), xc.data_ptr<scalar_t>(),
                                               out.data_ptr<scalar_t>());
  }));
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("half_mix", &half_mix, "mix");
  m.def("row_mean", &row_mean, "mean");
}
