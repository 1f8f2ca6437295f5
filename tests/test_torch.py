"""``polypy.torch``: CUDA kernels and their synthesized gradients as ``torch.autograd`` functions.

Gradients are checked with ``torch.autograd.gradcheck`` (float64, finite differences against the
backward that launches ``K_grad``) on several samples; layernorm and softmax are compared with
PyTorch's own CPU operators (values and gradients through ``loss.backward()``); the checks on
tensors (dtype, device, contiguity, shape) fail with errors naming the parameter; the kernel
reads and writes the tensors' own memory.
"""
from __future__ import annotations

import io
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="polypy.torch needs PyTorch: pip install -e '.[torch]'")

import polypy  # noqa: E402
import polypy.torch as pt  # noqa: E402
from samples.spec import sample  # noqa: E402

F64 = torch.float64


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    # compiled code goes to this module's temporary directory, not the user's cache
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLYPY_CACHE_DIR", str(tmp_path_factory.mktemp("polypy-cache")))
        yield


def _compile(name: str):
    return polypy.compile(sample(name).source, defines={**sample(name).defines, "REAL": "double"})


def _rows(x):
    return x.numel() // x.shape[-1]


@pytest.fixture(scope="module")
def layernorm():
    mod = _compile("layernorm")
    return pt.function(mod.layernorm, inputs=["x", "gamma", "beta"], outputs={"y": "x"},
                       params={"cols": lambda x: x.shape[-1], "eps": 1e-5}, grid=_rows, block=32)


@pytest.fixture(scope="module")
def softmax():
    mod = _compile("softmax_rows")
    return pt.function(mod.softmax_rows, inputs=["x"], outputs={"y": "x"},
                       params={"cols": lambda x: x.shape[-1]}, grid=_rows, block=64)


@pytest.fixture(scope="module")
def saxpy_mod():
    return _compile("saxpy")


@pytest.fixture(scope="module")
def saxpy(saxpy_mod):
    # y is in/out: passed in, updated on a copy, returned; a is an active scalar
    return pt.function(saxpy_mod.saxpy, inputs=["a", "x", "y"], outputs=["y"],
                       params={"n": lambda x: x.numel()}, grid=lambda x: (x.numel() + 31) // 32, block=32)


def _rand(*shape, rng=None, requires_grad=True):
    t = torch.randn(*shape, dtype=F64, generator=rng)
    return t.requires_grad_(requires_grad)


# --------------------------------------------------------------------------- gradcheck on samples


def test_gradcheck_layernorm(layernorm) -> None:
    rng = torch.Generator().manual_seed(0)
    x = (_rand(3, 20, rng=rng, requires_grad=False) * 2 + 1).requires_grad_()
    gamma, beta = _rand(20, rng=rng), _rand(20, rng=rng)
    assert torch.autograd.gradcheck(layernorm, (x, gamma, beta))


def test_gradcheck_softmax_rows(softmax) -> None:
    x = _rand(4, 37, rng=torch.Generator().manual_seed(1))  # fewer columns than threads
    assert torch.autograd.gradcheck(softmax, (x,))


def test_gradcheck_saxpy_scalar_and_inout(saxpy) -> None:
    rng = torch.Generator().manual_seed(2)
    a = torch.tensor(1.75, dtype=F64, requires_grad=True)
    x, y = _rand(70, rng=rng), _rand(70, rng=rng)  # a partial last block
    y_before = y.detach().clone()
    out = saxpy(a, x, y)
    assert torch.equal(y.detach(), y_before), "the in/out input must not be modified"
    torch.testing.assert_close(out, 1.75 * x + y, rtol=0, atol=1e-15)
    assert torch.autograd.gradcheck(saxpy, (a, x, y))
    out.sum().backward()
    torch.testing.assert_close(a.grad, x.detach().sum())
    assert a.grad.shape == a.shape


def test_gradcheck_gru_cell_on_a_2d_grid() -> None:
    mod = _compile("gru_cell")
    gru = pt.function(mod.gru_cell, inputs=["xg", "hg", "h"], outputs={"h_new": "h"},
                      params={"batch": lambda h: h.shape[0], "hidden": lambda h: h.shape[1]},
                      grid=lambda h: ((h.shape[1] + 7) // 8, (h.shape[0] + 3) // 4), block=(8, 4))
    rng = torch.Generator().manual_seed(3)
    batch, hidden = 5, 11  # partial blocks in both dimensions
    xg, hg, h = _rand(batch, 3 * hidden, rng=rng), _rand(batch, 3 * hidden, rng=rng), _rand(batch, hidden, rng=rng)
    assert torch.autograd.gradcheck(gru, (xg, hg, h))
    # against the same cell written with torch operators
    xz, xr, xc = xg.chunk(3, dim=1)
    hz, hr, hc = hg.chunk(3, dim=1)
    z, r = torch.sigmoid(xz + hz), torch.sigmoid(xr + hr)
    ref = (1 - z) * torch.tanh(xc + r * hc) + z * h
    torch.testing.assert_close(gru(xg, hg, h), ref)


def test_gradcheck_spmv_with_integer_inputs() -> None:
    mod = _compile("spmv_csr")
    spmv = pt.function(mod.spmv_csr, inputs=["row_ptr", "col_idx", "vals", "x"],
                       outputs={"y": lambda row_ptr: row_ptr.numel() - 1},
                       params={"nrows": lambda row_ptr: row_ptr.numel() - 1},
                       grid=lambda row_ptr: (row_ptr.numel() - 1 + 31) // 32, block=32)
    assert spmv.wrt == ("vals", "x"), "integer inputs are not differentiable"
    dense = torch.tensor([[1.0, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 4], [5, 0, 0, 6], [0, 7, 0, 0]], dtype=F64)
    row_ptr = torch.tensor([0, 2, 2, 4, 6, 7], dtype=torch.int32)  # CSR of dense (row 1 empty)
    col_idx = torch.tensor([0, 2, 1, 3, 0, 3, 1], dtype=torch.int32)
    vals = torch.tensor([1.0, 2, 3, 4, 5, 6, 7], dtype=F64, requires_grad=True)
    x = _rand(4, rng=torch.Generator().manual_seed(4))
    torch.testing.assert_close(spmv(row_ptr, col_idx, vals, x), dense @ x)
    assert torch.autograd.gradcheck(spmv, (row_ptr, col_idx, vals, x))
    with pytest.raises(polypy.UserError, match="only floating-point inputs"):
        pt.function(mod.spmv_csr, inputs=["row_ptr", "col_idx", "vals", "x"], outputs={"y": 5},
                    params={"nrows": 5}, grid=1, block=32, wrt=["col_idx"])


# --------------------------------------------------------------------------- against PyTorch's operators


def test_layernorm_matches_torch_values_and_gradients(layernorm) -> None:
    rng = torch.Generator().manual_seed(5)
    shape = (2, 3, 50)  # rows = 6 leading elements, 50 columns: two column passes of 32 threads
    x = (_rand(*shape, rng=rng, requires_grad=False) * 3 - 1).requires_grad_()
    gamma, beta = _rand(50, rng=rng), _rand(50, rng=rng)
    w = torch.randn(shape, dtype=F64, generator=rng)
    y = layernorm(x, gamma, beta)
    assert y.shape == shape and y.dtype == F64 and y.grad_fn is not None
    (y * w).sum().backward()
    ours = (x.grad, gamma.grad, beta.grad)
    for t in (x, gamma, beta):
        t.grad = None
    ref = torch.nn.functional.layer_norm(x, (50,), gamma, beta, eps=1e-5)
    (ref * w).sum().backward()
    torch.testing.assert_close(y, ref, rtol=1e-12, atol=1e-12)
    for got, want in zip(ours, (x.grad, gamma.grad, beta.grad)):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_softmax_matches_torch_values_and_gradients(softmax) -> None:
    rng = torch.Generator().manual_seed(6)
    x = (torch.randn(6, 130, dtype=F64, generator=rng) * 5).requires_grad_()  # 3 column passes
    target = torch.randint(0, 130, (6,), generator=rng)
    loss = torch.nn.functional.nll_loss(torch.log(softmax(x)), target)
    loss.backward()
    ours = x.grad
    x.grad = None
    ref = torch.nn.functional.nll_loss(torch.log(torch.softmax(x, dim=-1)), target)
    ref.backward()
    torch.testing.assert_close(loss, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ours, x.grad, rtol=1e-10, atol=1e-12)


def test_repeated_backwards_reuse_scratch_and_keep_results(softmax, saxpy) -> None:
    # the backward's scratch tensors (the output K_grad rewrites, the seed it consumes) are kept
    # and reused (fresh ones cost page faults, issue 38); gradients already returned, the seeds
    # given and an in/out buffer's gradient (which is the seed's copy) stay untouched
    rng = torch.Generator().manual_seed(9)
    x = _rand(5, 70, rng=rng)
    y = softmax(x)
    ref_y = torch.softmax(x, dim=-1)
    # non-contiguous seeds: copied (a contiguous one K_grad only reads at these sizes is passed as it is)
    seeds = [torch.randn(70, 5, dtype=F64, generator=rng).t() for _ in range(2)]
    kept = [s.clone() for s in seeds]
    grads = [torch.autograd.grad(y, x, grad_outputs=s, retain_graph=True)[0] for s in seeds]
    scratch = dict(softmax._scratch_tensors.tensors)
    assert set(scratch) == {("output", "y"), ("seed", "y")}
    again = torch.autograd.grad(y, x, grad_outputs=seeds[0], retain_graph=True)[0]
    assert all(softmax._scratch_tensors.tensors[k] is t for k, t in scratch.items())  # reused
    for s, k, g in zip(seeds, kept, grads):
        assert torch.equal(s, k)
        ref = torch.autograd.grad(ref_y, x, grad_outputs=s, retain_graph=True)[0]
        torch.testing.assert_close(g, ref, rtol=1e-10, atol=1e-12)
    assert torch.equal(again, grads[0])
    a = torch.tensor(0.5, dtype=F64, requires_grad=True)
    u, v = _rand(40, rng=rng), _rand(40, rng=rng)
    out = saxpy(a, u, v)
    first = torch.autograd.grad(out, v, grad_outputs=torch.full((40,), 2.0, dtype=F64), retain_graph=True)[0]
    torch.autograd.grad(out, v, grad_outputs=torch.full((40,), 3.0, dtype=F64))
    assert torch.equal(first, torch.full((40,), 2.0, dtype=F64))  # the in/out gradient is its own tensor


def test_backward_leaves_the_outputs_it_does_not_need_alone(softmax, layernorm) -> None:
    # K_grad is built without the forward's stores to the outputs the wrapper allocates
    # (scratch_outputs, autodiff.scratch; issue 38): their scratch tensors are neither written
    # nor zeroed (layernorm zero-fills its outputs) and the gradients stay right
    rng = torch.Generator().manual_seed(11)
    for fn, inputs, ref in ((softmax, (_rand(3, 40, rng=rng),), lambda x: torch.softmax(x, dim=-1)),
                            (layernorm, (_rand(3, 40, rng=rng), _rand(40, rng=rng), _rand(40, rng=rng)),
                             lambda x, g, b: torch.nn.functional.layer_norm(x, (40,), g, b, eps=1e-5))):
        out = fn(*inputs)
        seed = torch.randn(3, 40, dtype=F64, generator=rng)
        given = seed.clone()
        fn._scratch_tensors.__dict__.setdefault("tensors", {}).pop(("seed", "y"), None)  # (earlier tests')
        torch.autograd.grad(out, inputs, grad_outputs=seed, retain_graph=True)
        assert fn._untouched == {"y"}
        # layernorm's y[row * cols + c] is stored once per element (isl): K_grad only reads its
        # seed, which is passed without a copy; softmax's unsigned row offset only where its rows
        # cannot meet ((gridDim.x - 1) * cols fits in 32 bits: here), tested at each backward
        assert fn._seed_read == ({"y"} if fn is layernorm else set())
        assert {k for k, v in fn._seed_read_when.items() if v is not None} == (set() if fn is layernorm else {"y"})
        assert ("seed", "y") not in fn._scratch_tensors.tensors
        kept = fn._scratch_tensors.tensors[("output", "y")].fill_(float("nan"))
        ours = torch.autograd.grad(out, inputs, grad_outputs=seed, retain_graph=True)
        assert torch.isnan(kept).all() and torch.equal(seed, given)
        theirs = torch.autograd.grad(ref(*inputs), inputs, grad_outputs=seed)
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- autograd bookkeeping


def test_only_requested_gradients_and_no_graph_without_grad(layernorm) -> None:
    rng = torch.Generator().manual_seed(7)
    x = _rand(2, 8, rng=rng, requires_grad=False)
    gamma, beta = _rand(8, rng=rng), _rand(8, rng=rng, requires_grad=False)
    y = layernorm(x, gamma, beta)
    y.sum().backward()
    assert x.grad is None and beta.grad is None
    expected = torch.nn.functional.layer_norm(x, (8,), eps=1e-5).sum(dim=0)  # d(sum y)/d gamma
    torch.testing.assert_close(gamma.grad, expected)
    with torch.no_grad():
        assert layernorm(x, gamma, beta).grad_fn is None
    assert layernorm(x, gamma.detach(), beta).grad_fn is None


def test_wrt_limits_the_differentiated_inputs(saxpy_mod) -> None:
    f = pt.function(saxpy_mod.saxpy, inputs=["a", "x", "y"], outputs=["y"], params={"n": lambda x: x.numel()},
                    grid=lambda x: (x.numel() + 31) // 32, block=32, wrt=["x"])
    x, y = _rand(40), _rand(40)
    a = torch.tensor(2.0, dtype=F64, requires_grad=True)
    f(a, x, y).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((40,), 2.0, dtype=F64))
    assert a.grad is None and y.grad is None
    assert [p.name for p in f.gradient.gpu.params].count("d_a") == 0


def test_non_contiguous_inputs_are_copied(softmax) -> None:
    base = torch.randn(37, 5, dtype=F64, generator=torch.Generator().manual_seed(8))
    x = base.t().requires_grad_()  # 5 x 37, not contiguous
    assert not x.is_contiguous()
    y = softmax(x)
    torch.testing.assert_close(y, torch.softmax(x.detach(), dim=-1))
    w = torch.randn(5, 37, dtype=F64)
    (y * w).sum().backward()
    ref = x.detach().clone().requires_grad_()
    (torch.softmax(ref, dim=-1) * w).sum().backward()
    torch.testing.assert_close(x.grad, ref.grad)
    # an expanded incoming gradient (stride 0) is made contiguous before it seeds the shadow
    x.grad = None
    softmax(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.zeros_like(x), atol=1e-14, rtol=0)


def test_outputs_are_zero_filled_unless_asked_otherwise() -> None:
    mod = _compile("relu3")
    x = torch.tensor([-1.0, 0.5, 2.0], dtype=F64)
    spec = dict(inputs=["x"], outputs={"y": lambda x: x.numel() + 4}, params={"n": lambda x: x.numel()},
                grid=1, block=32)
    y = pt.function(mod.relu3, **spec)(x)  # the kernel writes y[0:3] only
    torch.testing.assert_close(y, torch.tensor([0.0, 0.125, 4.0, 0, 0, 0, 0], dtype=F64))
    y = pt.function(mod.relu3, zero_outputs=False, **spec)(x)  # torch.empty: only y[0:3] is defined
    torch.testing.assert_close(y[:3], torch.tensor([0.0, 0.125, 4.0], dtype=F64))


# --------------------------------------------------------------------------- zero copy


def test_out_writes_into_the_given_tensor(layernorm) -> None:
    rng = torch.Generator().manual_seed(9)
    x, gamma, beta = (_rand(4, 24, rng=rng, requires_grad=False), _rand(24, rng=rng, requires_grad=False),
                      _rand(24, rng=rng, requires_grad=False))
    buf = torch.full((3, 4, 24), -7.0, dtype=F64)
    ptr = buf[1].data_ptr()
    got = layernorm(x, gamma, beta, out=buf[1])  # a contiguous view into a larger buffer
    assert got.data_ptr() == ptr
    torch.testing.assert_close(buf[1], torch.nn.functional.layer_norm(x, (24,), gamma, beta, eps=1e-5))
    assert torch.all(buf[0] == -7.0) and torch.all(buf[2] == -7.0)


def test_launch_updates_tensors_in_place(saxpy_mod) -> None:
    x = torch.arange(100, dtype=F64)
    y = torch.ones(100, dtype=F64)
    y_view = y[:]  # shares y's memory
    ptr = y.data_ptr()
    pt.launch(saxpy_mod.saxpy)[4, 32](100, 0.5, x, y)
    assert y.data_ptr() == ptr
    torch.testing.assert_close(y_view, 0.5 * torch.arange(100, dtype=F64) + 1)
    pt.launch(saxpy_mod.saxpy)[4, 32](n=100, a=torch.tensor(1.0), x=x, y=y)
    torch.testing.assert_close(y, 1.5 * torch.arange(100, dtype=F64) + 1)
    # the gradient kernel too: d_x accumulates a * d_y
    g = polypy.grad(saxpy_mod.saxpy, wrt=["x"])
    d_x, d_y = torch.zeros(100, dtype=F64), torch.full((100,), 2.0, dtype=F64)
    pt.launch(g)[4, 32](100, 0.5, x, d_x, y.clone(), d_y)
    torch.testing.assert_close(d_x, torch.full((100,), 1.0, dtype=F64))


# --------------------------------------------------------------------------- errors


def test_wrong_dtype_names_the_parameter(layernorm) -> None:
    x = torch.randn(2, 8)  # float32 for a double kernel
    with pytest.raises(polypy.UserError, match=r"'x' of kernel 'layernorm'.*must have dtype torch\.float64, "
                                               r"got torch\.float32"):
        layernorm(x, torch.ones(8, dtype=F64), torch.zeros(8, dtype=F64))
    with pytest.raises(polypy.UserError, match=r"'gamma'.*must be a torch\.Tensor"):
        layernorm(x.double(), np.ones(8), torch.zeros(8, dtype=F64))


def test_other_devices_are_refused(layernorm, saxpy) -> None:
    meta = torch.empty(2, 8, dtype=F64, device="meta")
    with pytest.raises(polypy.UserError, match=r"'x' of kernel 'layernorm' is on device meta.*x\.cpu\(\)"):
        layernorm(meta, torch.ones(8, dtype=F64), torch.zeros(8, dtype=F64))
    with pytest.raises(polypy.UserError, match=r"'a' of kernel 'saxpy' is on device meta"):
        saxpy(torch.empty((), dtype=F64, device="meta"), torch.ones(4, dtype=F64), torch.ones(4, dtype=F64))
    if torch.cuda.is_available():  # only where a CUDA device exists
        with pytest.raises(polypy.UserError, match="on device cuda"):
            layernorm(torch.ones(2, 8, dtype=F64, device="cuda"), torch.ones(8, dtype=F64), torch.zeros(8, dtype=F64))


def test_non_contiguous_outputs_are_refused(layernorm, saxpy_mod) -> None:
    x, gamma, beta = torch.randn(4, 8, dtype=F64), torch.ones(8, dtype=F64), torch.zeros(8, dtype=F64)
    out = torch.zeros(8, 4, dtype=F64).t()
    with pytest.raises(polypy.UserError, match=r"'y' of kernel 'layernorm' is not contiguous"):
        layernorm(x, gamma, beta, out=out)
    y = torch.zeros(200, dtype=F64)[::2]
    with pytest.raises(polypy.UserError, match=r"'y' of kernel 'saxpy' is not contiguous"):
        pt.launch(saxpy_mod.saxpy)[4, 32](100, 1.0, torch.ones(100, dtype=F64), y)


def test_wrong_shapes_are_refused(layernorm, saxpy) -> None:
    x = torch.randn(4, 8, dtype=F64)
    with pytest.raises(polypy.UserError, match=r"'gamma' of kernel 'layernorm' is too small.*needs 8 elements"):
        layernorm(x, torch.ones(5, dtype=F64), torch.zeros(8, dtype=F64))
    with pytest.raises(polypy.UserError, match=r"out= tensor for output 'y'.*shape \(4, 9\), expected \(4, 8\)"):
        layernorm(x, torch.ones(8, dtype=F64), torch.zeros(8, dtype=F64), out=torch.empty(4, 9, dtype=F64))
    with pytest.raises(polypy.UserError, match=r"'y' of kernel 'saxpy' is too small"):
        saxpy(1.0, torch.ones(64, dtype=F64), torch.ones(10, dtype=F64))
    with pytest.raises(polypy.UserError, match=r"'a' of kernel 'saxpy'.*is a scalar"):
        saxpy(torch.ones(2, dtype=F64), torch.ones(4, dtype=F64), torch.ones(4, dtype=F64))


def test_out_refused_where_a_gradient_is_needed(layernorm) -> None:
    x = torch.randn(2, 8, dtype=F64, requires_grad=True)
    with pytest.raises(polypy.UserError, match="out= does not record autograd history"):
        layernorm(x, torch.ones(8, dtype=F64), torch.zeros(8, dtype=F64), out=torch.empty(2, 8, dtype=F64))
    y = torch.zeros(100, dtype=F64, requires_grad=True)
    with pytest.raises(polypy.UserError, match="requires grad and the kernel may write it"):
        pt.launch(layernorm.kernel)[2, 32](x, torch.ones(8, dtype=F64), torch.zeros(8, dtype=F64), y, 8, 1e-5)


def test_bad_declarations_are_refused(saxpy_mod) -> None:
    k = saxpy_mod.saxpy
    common = dict(grid=1, block=32)
    with pytest.raises(polypy.UserError, match=r"say what to pass for 'n'"):
        pt.function(k, inputs=["a", "x", "y"], outputs=["y"], **common)
    with pytest.raises(polypy.UserError, match=r"'z', which is not a parameter"):
        pt.function(k, inputs=["a", "x", "z"], outputs=["y"], params={"n": 4}, **common)
    with pytest.raises(polypy.UserError, match=r"output 'x'.*const pointer"):
        pt.function(k, inputs=["a", "y"], outputs={"x": 4, "y": None}, params={"n": 4}, **common)
    with pytest.raises(polypy.UserError, match=r"asks for 'w', which is not an input"):
        pt.function(k, inputs=["a", "x", "y"], outputs=["y"], params={"n": lambda w: w.numel()}, **common)
    with pytest.raises(polypy.UserError, match=r"output 'y' of kernel 'saxpy' needs a shape"):
        pt.function(k, inputs=["a", "x"], outputs=["y"], params={"n": 4}, **common)
    with pytest.raises(polypy.UserError, match="compiled kernel"):
        pt.function("saxpy", inputs=[], outputs=[], **common)


def test_missing_torch_is_a_clear_error(saxpy_mod, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with pytest.raises(pt.TorchMissingError, match=r"needs PyTorch.*pip install -e '\.\[torch\]'"):
        pt.function(saxpy_mod.saxpy, inputs=["a", "x", "y"], outputs=["y"], params={"n": 4}, grid=1, block=32)
    assert issubclass(pt.TorchMissingError, polypy.UserError) and issubclass(pt.TorchMissingError, ImportError)


# --------------------------------------------------------------------------- the benchmark


def test_bench_small_prints_rows() -> None:
    from bench import torch_ops

    buf = io.StringIO()
    rows = torch_ops.run(["--small", "--repeat", "1", "--only", "softmax"], file=buf)  # one gradient to compile
    text = buf.getvalue()
    assert [r.op for r in rows] == ["softmax"] and rows[0].shape == torch_ops.SMALL["softmax"]
    for r in rows:
        assert r.max_error < 1e-4, r  # the polypy results agree with torch's before anything is timed
        assert r.polypy_fwd > 0 and r.torch_fwd > 0 and r.polypy_bwd > 0 and r.torch_bwd > 0
    assert "softmax" in text and "fwd ratio" in text and "bwd ratio" in text
