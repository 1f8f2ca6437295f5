// The C++ side of polypy's test extension: checks, Python bindings and the operators' schemas.
#include <torch/extension.h>

torch::Tensor square_affine_cuda(torch::Tensor x, double a, double b);
torch::Tensor square_affine_backward_cuda(torch::Tensor grad_y, torch::Tensor x, double a);
torch::Tensor row_sum_cuda(torch::Tensor x);
torch::Tensor axpy_acc(torch::Tensor x, torch::Tensor y, double a);
torch::Tensor weighted_square(torch::Tensor x, torch::Tensor w);
torch::Tensor weighted_square_backward(torch::Tensor grad_out, torch::Tensor x, torch::Tensor w);
torch::Tensor offsets_3d(torch::Tensor x);

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_DEVICE(x) TORCH_CHECK(x.device().type() == torch::kCUDA, #x " must be on the CUDA device")

torch::Tensor forward(torch::Tensor x, double a, double b) {
  CHECK_CUDA(x);
  CHECK_DEVICE(x);
  return square_affine_cuda(x, a, b);
}

torch::Tensor backward(torch::Tensor grad_y, torch::Tensor x, double a) {
  CHECK_CUDA(grad_y);
  CHECK_CUDA(x);
  return square_affine_backward_cuda(grad_y, x, a);
}

torch::Tensor row_sum(torch::Tensor x) {
  CHECK_CUDA(x);
  return row_sum_cuda(x);
}

bool is_cuda_tensor(torch::Tensor x) { return x.is_cuda(); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "a * x^2 + b (CUDA)");
  m.def("backward", &backward, "its gradient (CUDA)");
  m.def("row_sum", &row_sum, "sum of each row (CUDA)");
  m.def("is_cuda_tensor", &is_cuda_tensor, "x.is_cuda() as the extension sees it");
  m.def("axpy_acc", &axpy_acc, "y + a * x through 1-D packed accessors (CUDA)");
  m.def("weighted_square", &weighted_square, "x * x * w[column] through 2-D packed accessors (CUDA)");
  m.def("weighted_square_backward", &weighted_square_backward, "its gradient for x (CUDA)");
  m.def("offsets_3d", &offsets_3d, "x[b][i][j] * (b + 1) - x[b][i][0] through 3-D packed accessors (CUDA)");
}

TORCH_LIBRARY(polypy_test, m) {
  m.def("square_affine(Tensor x, float a, float b) -> Tensor");
  m.def("square_affine_backward(Tensor grad_y, Tensor x, float a) -> Tensor");
}
