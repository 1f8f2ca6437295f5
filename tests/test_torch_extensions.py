"""``polypy.torch.load`` / ``load_inline``: a PyTorch CUDA extension (our own, in the style of
PyTorch's extension tutorial: tests/torch_ext/ops.cu and ops.cpp) built unmodified for CPU tensors.

Each translation parses PyTorch's headers and each build compiles against them (a minute or more
each), so the module parses twice in all: one ``load`` of tests/torch_ext (shared by the tests
through a module-scoped fixture; ``polypy.torch.kernels`` of its ``.cu`` file reuses that parse)
and one ``load_inline``. Everything is built in temporary directories. The accessor lowering
itself is tested quickly, without ATen, in tests/test_torch_accessors.py.
"""
from __future__ import annotations

import pathlib
import shutil

import pytest

torch = pytest.importorskip("torch", reason="polypy.torch.load needs PyTorch: pip install -e '.[torch]'")
if shutil.which("c++") is None and shutil.which("g++") is None:
    pytest.skip("building a PyTorch extension needs a C++ compiler", allow_module_level=True)

import polypy.torch as pt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent / "torch_ext"


@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    build = tmp_path_factory.mktemp("ops")
    sources = [str(HERE / "ops.cpp"), str(HERE / "ops.cu")]
    return pt.load("polypy_test_ops", sources, build_directory=str(build)), build, sources


def test_forward_matches_reference_in_float32_and_float64(ext):
    mod = ext[0]
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(1000, dtype=dtype)
        y = mod.forward(x, 1.5, -0.25)
        assert y.dtype == dtype
        torch.testing.assert_close(y, 1.5 * x * x - 0.25)
    # a non-contiguous input: the host code's .contiguous() as written
    x = torch.randn(40, 30, dtype=torch.float64).t()
    torch.testing.assert_close(mod.forward(x, 2.0, 1.0), 2.0 * x * x + 1.0)


def test_cpu_tensors_stand_in_for_cuda_tensors(ext):
    mod = ext[0]
    assert mod.is_cuda_tensor(torch.zeros(3)) is True  # x.is_cuda() in the extension's .cpp


def test_two_dimensional_grid_with_shared_memory_and_barriers(ext):
    mod = ext[0]
    x = torch.randn(7, 1000, dtype=torch.float64)
    torch.testing.assert_close(mod.row_sum(x), x.sum(dim=1))
    with pytest.raises(RuntimeError, match="x must be 2-D"):  # TORCH_CHECK in the translated host code
        mod.row_sum(torch.zeros(3))


class _SquareAffine(torch.autograd.Function):
    """The extension's own backward kernel, through torch.autograd.Function."""

    @staticmethod
    def forward(ctx, x, a, b, mod):
        ctx.save_for_backward(x)
        ctx.a, ctx.mod = a, mod
        return mod.forward(x, a, b)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return ctx.mod.backward(grad.contiguous(), x, ctx.a), None, None, None


def test_autograd_function_with_the_extensions_backward_kernel(ext):
    mod = ext[0]
    x = torch.randn(300, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: _SquareAffine.apply(t, 0.75, 2.0, mod), (x,))
    _SquareAffine.apply(x, 0.75, 2.0, mod).sum().backward()
    torch.testing.assert_close(x.grad, 1.5 * x.detach())


def test_torch_library_ops_dispatch_cpu_tensors_to_the_translated_kernels(ext):
    ops = torch.ops.polypy_test
    x = torch.randn(50, dtype=torch.float64)
    torch.testing.assert_close(ops.square_affine(x, 3.0, 1.0), 3.0 * x * x + 1.0)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.a = inputs[1]

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return ops.square_affine_backward(grad.contiguous(), x, ctx.a), None, None

    torch.library.register_autograd("polypy_test::square_affine", backward, setup_context=setup_context)

    @torch.library.register_fake("polypy_test::square_affine")
    def _(x, a, b):
        return torch.empty_like(x)

    @torch.library.register_fake("polypy_test::square_affine_backward")
    def _(grad_y, x, a):
        return torch.empty_like(x)

    xg = torch.randn(20, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: ops.square_affine(t, -0.5, 0.25), (xg,))
    for args in ([torch.randn(20, requires_grad=True), 2.0, 1.0], [torch.randn(3, 4), -1.0, 0.5]):
        torch.library.opcheck(ops.square_affine.default, args)


def test_a_second_load_reuses_the_build(ext):
    mod, build, sources = ext
    translated = build / "polypy" / "ops.cu.cpp"
    before = translated.stat().st_mtime_ns
    again = pt.load("polypy_test_ops", sources, build_directory=str(build))
    assert again.forward(torch.ones(2), 1.0, 1.0).tolist() == [2.0, 2.0]
    assert translated.stat().st_mtime_ns == before  # not translated again (same key)


CUDA_SOURCE = r"""
template <typename scalar_t>
__global__ void axpy_kernel(int n, scalar_t alpha, const scalar_t* x, scalar_t* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += alpha * x[i];
}

torch::Tensor axpy(torch::Tensor x, torch::Tensor y, double alpha) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(x.sizes() == y.sizes(), "x and y must have the same shape");
  auto out = y.clone();
  int n = x.numel();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "axpy", [&] {
    axpy_kernel<scalar_t><<<(n + 63) / 64, 64>>>(n, (scalar_t)alpha, x.contiguous().data_ptr<scalar_t>(),
                                                 out.data_ptr<scalar_t>());
  });
  return out;
}
"""

CPP_SOURCE = "torch::Tensor axpy(torch::Tensor x, torch::Tensor y, double alpha);"


def test_load_inline_with_functions(tmp_path):
    mod = pt.load_inline("polypy_axpy_inline", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                         functions=["axpy"], build_directory=str(tmp_path))
    x = torch.randn(1001, dtype=torch.float64)
    y = torch.randn(1001, dtype=torch.float64)
    torch.testing.assert_close(mod.axpy(x, y, 0.5), y + 0.5 * x)
    xf, yf = x.float(), y.float()
    torch.testing.assert_close(mod.axpy(xf, yf, -2.0), yf - 2.0 * xf)
    with pytest.raises(RuntimeError, match="same shape"):
        mod.axpy(x, y[:5], 1.0)


def test_packed_accessors_1d_read_and_write(ext):
    mod = ext[0]
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(1001, dtype=dtype)
        y = torch.randn(1001, dtype=dtype)
        torch.testing.assert_close(mod.axpy_acc(x, y, -0.75), y - 0.75 * x)


def test_packed_accessors_2d_follow_the_strides_of_a_transposed_tensor(ext):
    mod = ext[0]
    x = torch.randn(70, 9, dtype=torch.float64).t()  # (9, 70), strides (1, 9): not contiguous
    w = torch.randn(70, dtype=torch.float64)
    torch.testing.assert_close(mod.weighted_square(x, w), x * x * w)
    xf, wf = x.float(), w.float()
    torch.testing.assert_close(mod.weighted_square(xf, wf), xf * xf * wf)


class _WeightedSquare(torch.autograd.Function):
    """The extension's accessor kernels: forward and its backward for x."""

    @staticmethod
    def forward(ctx, x, w, mod):
        ctx.save_for_backward(x, w)
        ctx.mod = mod
        return mod.weighted_square(x, w)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return ctx.mod.weighted_square_backward(grad, x, w), None, None


def test_packed_accessor_backward_kernel_passes_gradcheck(ext):
    mod = ext[0]
    x = torch.randn(5, 40, dtype=torch.float64).t().requires_grad_()  # strided as well
    w = torch.randn(5, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda t: _WeightedSquare.apply(t, w, mod), (x,))
    g = torch.randn(40, 5, dtype=torch.float64)
    torch.testing.assert_close(mod.weighted_square_backward(g, x.detach(), w), 2 * x.detach() * w * g)


def test_packed_accessors_3d_size_stride_and_data(ext):
    mod = ext[0]
    x = torch.randn(6, 4, 33, dtype=torch.float64).permute(1, 0, 2)  # (4, 6, 33), strides (33, 132, 1)
    want = x * torch.arange(1, 5, dtype=torch.float64).view(4, 1, 1) - x[:, :, :1]
    torch.testing.assert_close(mod.offsets_3d(x), want)


def test_forward_only_kernel_gets_its_backward_from_polypy_grad(ext):
    # The extension's forward kernel alone, compiled by polypy from the extension's .cu file (the
    # module its load parsed: ext comes first); the backward is synthesized (the extension's own
    # backward kernel is not used).
    mod = pt.kernels(HERE / "ops.cu")
    f = pt.function(mod.square_affine_kernel_double, inputs=["x"], outputs={"y": "x"},
                    params={"n": lambda x: x.numel(), "a": 0.75, "b": 2.0},
                    grid=lambda x: (x.numel() + 63) // 64, block=64)
    x = torch.randn(300, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(f(x), 0.75 * x * x + 2.0)
    assert torch.autograd.gradcheck(f, (x,))
