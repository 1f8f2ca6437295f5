"""``polypy.torch_alloc``: the fresh tensors ``polypy.torch`` returns, large ones on their own
huge-page mapping (issue 38: a fresh 32 MiB gradient cost 12-14 ms of page faults per backward).

The allocator's tensors are checked for what the wrapper relies on (zeros, contiguous, their own
memory, 2 MiB aligned, unmapped when freed), and the forward's outputs and the backward's input
gradients of ``polypy.torch.function`` are checked to come from it (with the size threshold
lowered, so that the tensors stay small) and to have PyTorch's values.
"""
from __future__ import annotations

import mmap

import pytest

torch = pytest.importorskip("torch", reason="polypy.torch needs PyTorch: pip install -e '.[torch]'")

import polypy  # noqa: E402
import polypy.torch as pt  # noqa: E402
from polypy import torch_alloc  # noqa: E402
from samples.spec import sample  # noqa: E402

F64 = torch.float64
HUGE = getattr(mmap, "MADV_HUGEPAGE", None) is not None and hasattr(mmap.mmap, "madvise")
needs_madvise = pytest.mark.skipif(not HUGE, reason="this Python has no mmap.madvise(MADV_HUGEPAGE)")


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLYPY_CACHE_DIR", str(tmp_path_factory.mktemp("polypy-cache")))
        yield


def _mapped(address: int) -> bool:
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
            if lo <= address < hi:
                return True
    return False


@needs_madvise
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
def test_large_tensors_are_zeros_on_their_own_aligned_mapping(dtype) -> None:
    shape = (torch_alloc.MIN_BYTES // 4 // 64 + 3, 64)  # above the threshold for every dtype here
    for make in (torch_alloc.zeros, torch_alloc.empty):
        a, b = make(shape, dtype), make(shape, dtype)
        assert a.shape == shape and a.dtype == dtype and a.is_contiguous() and a.device.type == "cpu"
        assert a.data_ptr() % torch_alloc.HUGE_PAGE == 0
        assert not torch.any(a) and not torch.any(b)
        a.fill_(7)
        assert not torch.any(b)  # separate memory
        assert int(a.sum()) == 7 * a.numel()


@needs_madvise
def test_the_mapping_goes_with_the_tensor() -> None:
    t = torch_alloc.zeros((torch_alloc.MIN_BYTES // 8,), torch.float64)
    view = t[10:20]
    address = t.data_ptr()
    assert _mapped(address)
    del t
    assert _mapped(address)  # a view keeps the storage
    view += 1
    del view
    assert not _mapped(address)


def test_small_tensors_are_torchs() -> None:
    t = torch_alloc.zeros((3, 5), F64)
    assert torch.equal(t, torch.zeros(3, 5, dtype=F64))
    t.resize_(30)  # an ordinary tensor of PyTorch's allocator: resizable
    e = torch_alloc.empty((0,), torch.float32)
    assert e.shape == (0,)


@pytest.fixture
def small_threshold(monkeypatch):
    monkeypatch.setattr(torch_alloc, "MIN_BYTES", 1)
    return None


def _compile(name: str):
    return polypy.compile(sample(name).source, defines={**sample(name).defines, "REAL": "double"})


@needs_madvise
def test_outputs_and_gradients_come_from_the_allocator(small_threshold) -> None:
    mod = _compile("softmax_rows")
    softmax = pt.function(mod.softmax_rows, inputs=["x"], outputs={"y": "x"},
                          params={"cols": lambda x: x.shape[-1]}, grid=lambda x: x.shape[0], block=64,
                          zero_outputs=False)
    rng = torch.Generator().manual_seed(3)
    x = (torch.randn(7, 150, dtype=F64, generator=rng) * 3).requires_grad_()
    seeds = [torch.randn(7, 150, dtype=F64, generator=rng) for _ in range(2)]
    y = softmax(x)
    assert y.data_ptr() % torch_alloc.HUGE_PAGE == 0
    ref = torch.softmax(x, dim=-1)
    torch.testing.assert_close(y, ref, rtol=1e-12, atol=1e-14)
    grads = [torch.autograd.grad(y, x, grad_outputs=s, retain_graph=True)[0] for s in seeds]
    for g, s in zip(grads, seeds):
        assert g.data_ptr() % torch_alloc.HUGE_PAGE == 0
        want = torch.autograd.grad(ref, x, grad_outputs=s, retain_graph=True)[0]
        torch.testing.assert_close(g, want, rtol=1e-10, atol=1e-13)
    assert grads[0].data_ptr() != grads[1].data_ptr()
    # through .backward(): the gradient accumulated into x.grad
    (y * seeds[0]).sum().backward(retain_graph=True)
    torch.testing.assert_close(x.grad, grads[0], rtol=0, atol=0)
    (y * seeds[1]).sum().backward()
    torch.testing.assert_close(x.grad, grads[0] + grads[1], rtol=0, atol=0)


SCALE = """
__global__ void scale_some(const double* x, double* y, double* z, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = 3.0 * x[i];
        if (i % 3 == 0)
            z[i] = x[i] * x[i];
    }
}
"""


@needs_madvise
@pytest.mark.parametrize("zero_outputs", [True, False])
def test_allocated_outputs_and_their_gradients(small_threshold, tmp_path, zero_outputs) -> None:
    # y is written everywhere, z at every third element: with zero_outputs its other elements
    # are zeros (the allocator's memory is, and nothing writes it first)
    src = tmp_path / "scale.cu"
    src.write_text(SCALE)
    mod = polypy.compile(src)
    f = pt.function(mod.scale_some, inputs=["x"], outputs={"y": "x", "z": "x"},
                    params={"n": lambda x: x.numel()}, grid=lambda x: (x.numel() + 31) // 32, block=32,
                    zero_outputs=zero_outputs)
    rng = torch.Generator().manual_seed(5)
    x = torch.randn(70, dtype=F64, generator=rng, requires_grad=True)
    y, z = f(x)
    assert y.data_ptr() % torch_alloc.HUGE_PAGE == 0 and z.data_ptr() % torch_alloc.HUGE_PAGE == 0
    every_third = torch.arange(70) % 3 == 0
    torch.testing.assert_close(y, 3 * x, rtol=0, atol=0)
    torch.testing.assert_close(z[every_third], (x * x)[every_third], rtol=0, atol=0)
    if zero_outputs:
        assert not torch.any(z[~every_third])
    sy, sz = torch.randn(70, dtype=F64, generator=rng), torch.randn(70, dtype=F64, generator=rng)
    (gx,) = torch.autograd.grad((y, z), x, grad_outputs=(sy, sz))
    assert gx.data_ptr() % torch_alloc.HUGE_PAGE == 0
    torch.testing.assert_close(gx, 3 * sy + torch.where(every_third, 2 * x.detach() * sz, 0), rtol=1e-15, atol=0)


@needs_madvise
def test_zero_filled_outputs_and_input_gradients(small_threshold) -> None:
    # saxpy: y is in/out (a copy of the input, not the allocator's); a and x get fresh zero
    # shadows; a kernel that writes part of an allocated zero-filled output
    mod = _compile("saxpy")
    saxpy = pt.function(mod.saxpy, inputs=["a", "x", "y"], outputs=["y"],
                        params={"n": lambda x: x.numel()}, grid=lambda x: (x.numel() + 31) // 32, block=32)
    rng = torch.Generator().manual_seed(4)
    a = torch.tensor(0.75, dtype=F64, requires_grad=True)
    x = torch.randn(100, dtype=F64, generator=rng, requires_grad=True)
    yin = torch.randn(100, dtype=F64, generator=rng, requires_grad=True)
    out = saxpy(a, x, yin)
    torch.testing.assert_close(out, 0.75 * x + yin, rtol=1e-15, atol=0)
    seed = torch.randn(100, dtype=F64, generator=rng)
    ga, gx, gy = torch.autograd.grad(out, (a, x, yin), grad_outputs=seed)
    assert gx.data_ptr() % torch_alloc.HUGE_PAGE == 0
    torch.testing.assert_close(gx, 0.75 * seed, rtol=1e-15, atol=0)
    torch.testing.assert_close(gy, seed, rtol=0, atol=0)
    torch.testing.assert_close(ga, (seed * x).sum(), rtol=1e-12, atol=1e-14)
