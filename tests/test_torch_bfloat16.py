"""c10::BFloat16 (at::BFloat16) in the kernels of a PyTorch CUDA extension built by
``polypy.torch.load`` (tests/torch_ext/bf16_ops.cu, one build), and the corners of c10::Half that
tests/test_torch_half.py leaves out (std::numeric_limits, a __shared__ array, __ldg; atomics on
Half and BFloat16 memory are refused), and ATen/cuda/Atomic.cuh's gpuAtomicAdd on float memory.

The BFloat16 instances of kernels dispatched with AT_DISPATCH_FLOATING_TYPES_AND2(Half, BFloat16)
and AT_DISPATCH_FLOATING_TYPES_AND(BFloat16) agree bit for bit with a reference that computes in
float32 with torch and rounds each BFloat16-typed result once with torch's ``.to(torch.bfloat16)``
(round to nearest even), NaN included: c10's ``round_to_nearest_even`` makes every NaN 0x7FC0 (the
kernels' BFloat16(float)); torch's vectorized conversion would give 0xFFFF, so the reference
writes c10's NaN itself."""
from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="polypy.torch.load needs PyTorch: pip install -e '.[torch]'")
if shutil.which("c++") is None and shutil.which("g++") is None:
    pytest.skip("building a PyTorch extension needs a C++ compiler", allow_module_level=True)

import polypy  # noqa: E402
import polypy.torch as pt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent / "torch_ext"
C10_NAN = {torch.bfloat16: 0x7FC0}


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    build = tmp_path_factory.mktemp("bf16_ops")
    return pt.load("polypy_test_bf16_ops", [str(HERE / "bf16_ops.cu")], build_directory=str(build))


def _bits(t) -> np.ndarray:
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


class Rounded:
    """float32 arithmetic with every ``dtype``-typed result rounded once, as c10's operators do."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __call__(self, v) -> torch.Tensor:
        """float32 values rounded to ``dtype`` (to nearest even), as float32 values."""
        v = torch.as_tensor(v, dtype=torch.float32)
        return v.to(self.dtype).float()

    def bits(self, v) -> np.ndarray:
        """The ``dtype`` bits of float32 values that are already ``dtype`` values (or NaN)."""
        v = torch.as_tensor(v, dtype=torch.float32)
        out = _bits(v.to(self.dtype)).copy()
        if self.dtype in C10_NAN:
            out[torch.isnan(v).numpy()] = C10_NAN[self.dtype]
        return out

    def neg(self, v: torch.Tensor) -> torch.Tensor:
        # Half: __hneg (the sign bit); BFloat16: -float(a) rounded back (a NaN becomes 0x7FC0).
        return -v


def mix_reference(x, w, a: float, d: float, k: int, dtype):
    """bf16_mix_kernel's scalar_t results (as float32 values) and its float output."""
    r = Rounded(dtype)
    x, w = x.float(), w.float()
    ah = r(np.float32(a))                         # (scalar_t)a on the host: double -> float -> T
    v = r(x * ah)
    v = r(v + w)                                  # + tile[threadIdx.x] (w, through __ldg and shared memory)
    v = r(v + r(0.5))                             # v += (scalar_t)0.5
    v = r(r.neg(v) / r(3.0))                      # -v / scalar_t(3.0)
    f = v * np.float32(1.5)                       # T * float: a float
    v = torch.where(v > 0, r(v - r(1)), r(v * r(2)))  # T - int, T * int (the int made a T)
    dk = r(r(np.float32(d)) * r(np.float32(k)))   # static_cast<T>(double), static_cast<T>(int64_t)
    return r(v + dk), f


LIMIT_BITS = {
    # max, lowest, min, epsilon, infinity, quiet_NaN, denorm_min: std::numeric_limits<T> of PyTorch's headers
    torch.bfloat16: [0x7F7F, 0xFF7F, 0x0080, 0x3C00, 0x7F80, 0x7FC0, 0x0001],
    torch.float16: [0x7BFF, 0xFBFF, 0x0400, 0x1400, 0x7C00, 0x7E00, 0x0001],
}


def _check_mix(mod, x, w, a, d, k):
    dtype = x.dtype
    y, f, lim = mod.bf16_mix(x, w, a, d, k)
    assert y.dtype == dtype and f.dtype == torch.float32 and lim.dtype == dtype
    ry, rf = mix_reference(x, w, a, d, k, dtype)
    r = Rounded(dtype)
    if dtype == torch.bfloat16:  # bit for bit, NaN included (c10's 0x7FC0)
        np.testing.assert_array_equal(_bits(y), r.bits(ry))
    else:  # Half: polypy's NaN is __float2half's; compare where NaN is, and the bits elsewhere
        nan = torch.isnan(ry).numpy()
        np.testing.assert_array_equal(torch.isnan(y).numpy(), nan)
        np.testing.assert_array_equal(_bits(y)[~nan], r.bits(ry)[~nan])
    fnan = torch.isnan(rf).numpy()
    np.testing.assert_array_equal(torch.isnan(f).numpy(), fnan)
    np.testing.assert_array_equal(f.numpy()[~fnan].view(np.int32), rf.numpy()[~fnan].view(np.int32))
    np.testing.assert_array_equal(_bits(lim), np.array(LIMIT_BITS[dtype], dtype=np.uint16))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_elementwise_bit_for_bit(mod, dtype):
    g = torch.Generator().manual_seed(7)
    for n in (1000, 37):
        x = (torch.randn(n, generator=g) * 3).to(dtype)
        w = torch.randn(n, generator=g).to(dtype)
        _check_mix(mod, x, w, 0.7, 0.3, -3)


def test_elementwise_bfloat16_special_values(mod):
    # overflow to infinity (3e38 * 2), bfloat16 subnormals (below 2^-126), signed zeros, NaN,
    # infinities, and a tie (1 + 2^-8 is halfway between two bfloat16 values: to even)
    big, sub = 3.0e38, 2.0 ** -130
    x = torch.tensor([big, -big, sub, -sub, -0.0, 0.0, float("inf"), float("nan"), 1.0 + 2.0 ** -7, -0.0, 1e-38],
                     dtype=torch.bfloat16)
    w = torch.tensor([big, 1.0, 0.0, -0.0, -0.0, 0.0, 1.0, 1.0, 2.0 ** -8, 0.0, -1e-38], dtype=torch.bfloat16)
    for a, d, k in ((2.0, 0.0, 0), (1.0, -0.0, 5), (1.0 + 2.0 ** -8, 3e38, 2), (1.0, 1e-20, 1 << 40)):
        _check_mix(mod, x, w, a, d, k)


def test_elementwise_float32_float64_unchanged(mod):
    g = torch.Generator().manual_seed(8)
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(500, generator=g, dtype=dtype)
        w = torch.randn(500, generator=g, dtype=dtype)
        y, f, lim = mod.bf16_mix(x, w, 0.7, 0.5, 3)
        v = -(x * 0.7 + w + 0.5) / 3
        torch.testing.assert_close(y, torch.where(v > 0, v - 1, v * 2) + 1.5)
        torch.testing.assert_close(f, (v * 1.5).float())
        fi = torch.finfo(dtype)
        expect = torch.tensor([fi.max, fi.min, fi.tiny, fi.eps, float("inf")], dtype=dtype)
        torch.testing.assert_close(lim[:5], expect)
        assert torch.isnan(lim[5]) and lim[6] == fi.smallest_normal * fi.eps  # denorm_min


def row_sum_reference(x: torch.Tensor, block: int = 128) -> torch.Tensor:
    """The kernel's order: thread t sums columns t, t + block, ... in float, then the tree."""
    rows, cols = x.shape
    xs = x.float()
    out = torch.empty(rows)
    for r in range(rows):
        partial = torch.zeros(block)
        for start in range(0, cols, block):
            chunk = xs[r, start:start + block]
            partial[:len(chunk)] += chunk
        s = block // 2
        while s > 0:
            partial[:s] = partial[:s] + partial[s:2 * s]
            s //= 2
        out[r] = partial[0]
    return out


def test_reduction_bfloat16_in_float_accumulator(mod):
    g = torch.Generator().manual_seed(9)
    x = (torch.randn(6, 777, generator=g) * 4).bfloat16()
    x[3] = 3e38     # the float sum overflows: infinity
    x[4] = 1e-39    # bfloat16 subnormals, summed in float
    x[5, :5] = float("nan")
    out = mod.row_sum(x)
    assert out.dtype == torch.bfloat16
    np.testing.assert_array_equal(_bits(out), Rounded(torch.bfloat16).bits(row_sum_reference(x)))
    for dtype in (torch.float32, torch.float64):
        xd = torch.randn(5, 300, generator=g, dtype=dtype)
        torch.testing.assert_close(mod.row_sum(xd), xd.sum(1), rtol=1e-5, atol=1e-5)


def test_bfloat16_kernels_through_the_python_api_and_the_emulator(mod):
    # polypy.torch.kernels of the same .cu file (the parse load made): the c10::BFloat16 instances
    # take bfloat16 bits as np.uint16 arrays (NumPy has no bfloat16), compiled and emulated, and
    # torch.bfloat16 tensors through polypy.torch.launch.
    kernels = pt.kernels(HERE / "bf16_ops.cu")
    k = kernels.row_sum_kernel_c10_BFloat16
    g = torch.Generator().manual_seed(10)
    xt = (torch.randn(3, 300, generator=g) * 4).bfloat16()
    ref = Rounded(torch.bfloat16).bits(row_sum_reference(xt))
    for run in (k, k.emulate):
        out = np.zeros(3, dtype=np.uint16)
        run[(1, 3), 128](3, 300, _bits(xt), out)
        np.testing.assert_array_equal(out, ref)
    out_t = torch.zeros(3, dtype=torch.bfloat16)
    pt.launch(k)[(1, 3), 128](3, 300, xt, out_t)
    np.testing.assert_array_equal(_bits(out_t), ref)
    # a scalar c10::BFloat16 parameter takes its bits (np.uint16), as __nv_bfloat16 does
    m = kernels.bf16_mix_kernel_c10_BFloat16
    x, w = xt[0], xt[1]
    y, f, lim = torch.empty_like(x), torch.empty(300), torch.empty(7, dtype=torch.bfloat16)
    a_bits = _bits(torch.tensor([0.7]).bfloat16())[0]
    # the 1-D accessor x is its data pointer, size and stride
    pt.launch(m)[3, 128](n=300, x=x, x_size0=300, x_stride0=1, w=w, a=a_bits, d=0.3, k=-3, y=y, f=f, lim=lim)
    ry, rf = mix_reference(x, w, 0.7, 0.3, -3, torch.bfloat16)
    np.testing.assert_array_equal(_bits(y), Rounded(torch.bfloat16).bits(ry))
    np.testing.assert_array_equal(_bits(lim), np.array(LIMIT_BITS[torch.bfloat16], dtype=np.uint16))
    # the c10::Half instance on NumPy float16 arrays (the accessor's data too)
    h = kernels.bf16_mix_kernel_c10_Half
    xh, wh = x.half().numpy(), w.half().numpy()
    yh, fh, limh = np.empty(300, np.float16), np.empty(300, np.float32), np.empty(7, np.float16)
    h[3, 128](n=300, x=xh, x_size0=300, x_stride0=1, w=wh, a=np.float16(0.7), d=0.3, k=-3, y=yh, f=fh, lim=limh)
    ry, rf = mix_reference(torch.from_numpy(xh), torch.from_numpy(wh), 0.7, 0.3, -3, torch.float16)
    np.testing.assert_array_equal(yh.view(np.uint16), Rounded(torch.float16).bits(ry))
    np.testing.assert_array_equal(fh.view(np.int32), rf.numpy().view(np.int32))
    with pytest.raises(polypy.UserError, match="bfloat16"):
        polypy.grad(k, wrt=["x"])


def test_gpu_atomic_add_on_float_memory(mod):
    # ATen/cuda/Atomic.cuh's gpuAtomicAdd / gpuAtomicAddNoReturn (polypy's stand-in): atomicAdd.
    # Integer values, so that every order of the additions gives the same sums.
    for dtype in (torch.float32, torch.float64):
        x = torch.arange(-300, 700, dtype=dtype)
        out = mod.bucket_sum(x)
        expect = [x[j::4].sum().item() for j in range(4)] + [x.sum().item()]
        assert out.tolist() == expect


ATOMICS = """
#include <torch/extension.h>
#include <ATen/cuda/Atomic.cuh>
template <typename scalar_t>
__global__ void total(int n, const scalar_t* x, scalar_t* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) gpuAtomicAdd(&out[0], x[i]);
}
template <typename scalar_t>
__global__ void total2(int n, const scalar_t* x, scalar_t* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&out[0], x[i]);
}
void run(torch::Tensor x, torch::Tensor out) {
  AT_DISPATCH_FLOATING_TYPES_AND(at::ScalarType::Half, x.scalar_type(), "total", ([&] {
    total<scalar_t><<<1, 128>>>(x.numel(), x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>());
  }));
  AT_DISPATCH_FLOATING_TYPES_AND(at::ScalarType::BFloat16, x.scalar_type(), "total2", ([&] {
    total2<scalar_t><<<1, 128>>>(x.numel(), x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>());
  }));
}
"""


def test_atomics_on_half_and_bfloat16_memory_are_refused(tmp_path):
    # PyTorch's atomics on 16-bit memory round each update in an order the GPU chooses: refused at
    # the call, with clang's located error (one parse of PyTorch's headers).
    src = tmp_path / "atomics.cu"
    src.write_text(ATOMICS)
    with pytest.raises(polypy.UserError) as info:
        pt.kernels(src)
    err = info.value
    why = "is unavailable: polypy: atomics on c10::Half and c10::BFloat16 memory are not supported"
    assert err.message.startswith(f"'gpuAtomicAdd' {why}")
    assert err.loc is not None and (pathlib.Path(err.loc.file).name, err.loc.line) == (src.name, 7)
    assert f"{src.name}:12:14: note: 'atomicAdd' {why}" in str(err)  # the BFloat16 instance of total2
