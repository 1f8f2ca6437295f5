"""c10::Half (at::Half) in the kernels of a PyTorch CUDA extension built by ``polypy.torch.load``
(tests/torch_ext/half_ops.cu, one build): the Half instances of kernels dispatched with
AT_DISPATCH_FLOATING_TYPES_AND_HALF agree bit for bit with a NumPy float16 reference that rounds
each Half-typed result once (computed in float32, then np.float16), as c10::Half's operators do;
the float32 and float64 instances are unchanged."""
from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="polypy.torch.load needs PyTorch: pip install -e '.[torch]'")
if shutil.which("c++") is None and shutil.which("g++") is None:
    pytest.skip("building a PyTorch extension needs a C++ compiler", allow_module_level=True)

import polypy.torch as pt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent / "torch_ext"
f16, f32 = np.float16, np.float32


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    build = tmp_path_factory.mktemp("half_ops")
    return pt.load("polypy_test_half_ops", [str(HERE / "half_ops.cu")], build_directory=str(build))


def _h(v):
    """float32 values rounded to Half (np.float16 rounds to nearest even, as Half(float) does;
    beyond the largest Half, to infinity)."""
    with np.errstate(over="ignore"):
        return np.asarray(v, dtype=f32).astype(f16)


def _f(v):
    return np.asarray(v).astype(f32)


def half_mix_reference(x: np.ndarray, w: np.ndarray, a: float) -> tuple[np.ndarray, np.ndarray]:
    ah = _h(f32(a))                      # (scalar_t)a on the host: double -> float -> Half
    v = _h(_f(x) * _f(ah))               # x[i] * a: Half * Half, rounded
    v = _h(_f(v) + _f(w))                # + w[i]
    v = _h(_f(v) + _f(_h(0.5)))          # v += (scalar_t)0.5
    v = (-v) / np.float16(1)             # unary minus: the sign bit (exact)
    v = _h(_f(v) / _f(_h(f32(3.0))))     # / scalar_t(3.0)
    f = _f(v) * f32(1.5)                 # Half * float: a float
    y = np.where(_f(v) > 0, _h(_f(v) - _f(_h(1))), _h(_f(v) * _f(_h(2))))  # Half - int, Half * int
    return y.astype(f16), f


def row_mean_reference(x: np.ndarray, acc_dtype, out_dtype, block: int = 128) -> np.ndarray:
    """The kernel's order: thread t sums columns t, t + block, ... in acc_t, then the tree."""
    rows, cols = x.shape
    out = np.empty(rows, dtype=out_dtype)
    for r in range(rows):
        xs = x[r].astype(acc_dtype)
        partial = np.zeros(block, dtype=acc_dtype)
        for start in range(0, cols, block):
            chunk = xs[start:start + block]
            partial[:len(chunk)] = partial[:len(chunk)] + chunk
        s = block // 2
        while s > 0:
            partial[:s] = partial[:s] + partial[s:2 * s]
            s //= 2
        out[r] = np.asarray(partial[0] / acc_dtype(cols), dtype=acc_dtype).astype(out_dtype)
    return out


def _bits(t) -> np.ndarray:
    return t.contiguous().view(torch.int16).numpy()


def test_elementwise_half_bit_for_bit(mod):
    g = torch.Generator().manual_seed(3)
    for n in (1000, 37):
        x = (torch.randn(n, generator=g) * 3).half()
        w = torch.randn(n, generator=g).half()
        y, f = mod.half_mix(x, w, 0.7)
        assert y.dtype == torch.float16 and f.dtype == torch.float32
        ry, rf = half_mix_reference(x.numpy(), w.numpy(), 0.7)
        np.testing.assert_array_equal(_bits(y), ry.view(np.int16))
        np.testing.assert_array_equal(f.numpy().view(np.int32), rf.view(np.int32))


def test_elementwise_half_special_values(mod):
    # overflow to infinity, subnormals, signed zero, NaN (the sign flip keeps a NaN a NaN)
    x = torch.tensor([60000.0, -60000.0, 6e-8, -0.0, 0.0, float("inf"), float("nan"), 1e-5], dtype=torch.float16)
    w = torch.tensor([60000.0, 1.0, 0.0, -0.0, 0.0, 1.0, 1.0, -1e-5], dtype=torch.float16)
    y, f = mod.half_mix(x, w, 1.0)
    ry, rf = half_mix_reference(x.numpy(), w.numpy(), 1.0)
    nan = np.isnan(ry)
    np.testing.assert_array_equal(np.isnan(y.numpy()), nan)
    np.testing.assert_array_equal(_bits(y)[~nan], ry.view(np.int16)[~nan])
    np.testing.assert_array_equal(np.isnan(f.numpy()), np.isnan(rf))
    np.testing.assert_array_equal(f.numpy()[~np.isnan(rf)].view(np.int32), rf[~np.isnan(rf)].view(np.int32))


def test_elementwise_float32_float64_unchanged(mod):
    g = torch.Generator().manual_seed(4)
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(500, generator=g, dtype=dtype)
        w = torch.randn(500, generator=g, dtype=dtype)
        y, f = mod.half_mix(x, w, 0.7)
        v = -(x * 0.7 + w + 0.5) / 3
        torch.testing.assert_close(y, torch.where(v > 0, v - 1, v * 2))
        torch.testing.assert_close(f, (v * 1.5).float())


def test_reduction_with_acc_type_accumulator(mod):
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(6, 777, generator=g) * 4).half()
    out = mod.row_mean(x)
    assert out.dtype == torch.float16
    ref = row_mean_reference(x.numpy(), f32, f16)  # at::acc_type<c10::Half, true> is float
    np.testing.assert_array_equal(_bits(out), ref.view(np.int16))
    for dtype, acc in ((torch.float32, f32), (torch.float64, np.float64)):
        xd = torch.randn(5, 300, generator=g, dtype=dtype)
        np.testing.assert_array_equal(mod.row_mean(xd).numpy(), row_mean_reference(xd.numpy(), acc, acc))


def test_half_kernels_through_the_python_api_and_the_emulator(mod):
    # polypy.torch.kernels of the same .cu file (the parse load made): the c10::Half instances
    # on NumPy float16 arrays (their bits), compiled and on the reference emulator.
    kernels = pt.kernels(HERE / "half_ops.cu")
    k = kernels.row_mean_kernel_c10_Half
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((3, 300)) * 4).astype(f16)
    ref = row_mean_reference(x, f32, f16)
    for run in (k, k.emulate):
        out = np.zeros(3, dtype=f16)
        run[(1, 3), 128](3, 300, x, out)
        np.testing.assert_array_equal(out.view(np.int16), ref.view(np.int16))
    # through polypy.torch.launch, on float16 tensors
    xt, out_t = torch.from_numpy(x), torch.zeros(3, dtype=torch.float16)
    pt.launch(k)[(1, 3), 128](3, 300, xt, out_t)
    np.testing.assert_array_equal(_bits(out_t), ref.view(np.int16))


def test_half_kernels_are_refused_by_grad(mod):
    import polypy

    kernels = pt.kernels(HERE / "half_ops.cu")
    with pytest.raises(polypy.UserError, match="half precision"):
        polypy.grad(kernels.row_mean_kernel_c10_Half, wrt=["x"])
