"""Adjoints of read-only stencil inputs in tap launches (issue 38 item 1; ``autodiff.gather``,
``polypy.driver.gathered``): on the CPU, ``polypy.grad`` runs one plain-``+=`` launch per load of
the input (isl proves each injective on its domain), then the rest of ``K_grad``. Checked on
our own 1-D/2-D/3-D stencils: against finite differences in float64 on several launch shapes
(compiled and emulated), bit for bit against the one-kernel gradient where every sum is exact
(integer-valued floats), the report naming the form, and inputs that must keep today's form."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from autodiff import Accumulation
from polypy.driver.gathered import PhasedGradient
from polypy.ir import nodes as ir
from polypy.ir.visitor import walk

STENCIL_1D = r"""
__global__ void smooth(const double* a, double* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1)
    b[i] = 0.25 * a[i - 1] + 0.5 * a[i] - 1.5 * a[i + 1];
}
"""

# rows of a fixed length (the macro), as PolyBench writes them; a run-time row count; the
# coefficients are dyadic, so that sums of integer-valued floats are exact
STENCIL_2D = r"""
#define W 40
__global__ void conv(int ni, const double* A, double* B) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i > 0 && j > 0 && i < ni - 1 && j < W - 1)
    B[i * W + j] = 0.25 * A[(i - 1) * W + (j - 1)] - 0.5 * A[(i - 1) * W + j] + 0.75 * A[i * W + j]
                 + 0.125 * A[(i + 1) * W + j] - 1.5 * A[(i + 1) * W + (j + 1)] + 2.0 * A[i * W + j + 1];
}
"""

STENCIL_3D = r"""
#define NJ 12
#define NK 10
__global__ void heat(int ni, const double* A, double* B) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  int j = blockIdx.y * blockDim.y + threadIdx.y;
  int i = blockIdx.z * blockDim.z + threadIdx.z;
  if (i > 0 && j > 0 && k > 0 && i < ni - 1 && j < NJ - 1 && k < NK - 1)
    B[(i * NJ + j) * NK + k] = 2.0 * A[(i * NJ + j) * NK + k]
        + A[((i - 1) * NJ + j) * NK + k] - 3.0 * A[((i + 1) * NJ + j) * NK + k]
        + 0.5 * A[(i * NJ + j - 1) * NK + k] + 4.0 * A[(i * NJ + j + 1) * NK + k]
        - A[(i * NJ + j) * NK + k - 1] + 1.5 * A[(i * NJ + j) * NK + k + 1];
}
"""

# taps times a read-only coefficient array read at the output's element, and a partial that
# depends on the input itself (read-only, so the tap recomputes it)
COEFFICIENTS = r"""
__global__ void weighted(const double* a, const double* w, double* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 1 && i <= n - 2)
    b[i] = w[i] * (a[i - 1] - a[i + 1]) + a[i] * a[i + 1];
}
"""

# the input is written by the kernel (each thread clears the one element no other thread reads)
WRITES_INPUT = r"""
__global__ void pairs(double* a, double* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    b[i] = a[2 * i] * 3.0 + a[2 * i + 1] + a[2 * i + 2];
    a[2 * i + 1] = 0.0;
  }
}
"""

# the output is read and written before: the reverse sweep consumes its seed first (gather)
IN_OUT = r"""
__global__ void accumulate(const double* a, double* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1)
    b[i] = 0.5 * b[i] + a[i - 1] - a[i + 1];
}
"""

# the output is read after its store (its adjoint there is more than its seed): today's form
READ_AFTER = r"""
__global__ void twice(const double* a, double* b, double* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1) {
    b[i] = a[i - 1] - 2.0 * a[i + 1];
    c[i] = b[i] * b[i];
  }
}
"""


def _module(tmp_path, name, text):
    path = tmp_path / f"{name}.cu"
    path.write_text(text)
    return polypy.compile(str(path))


def _arrays(kernel, sizes, rng, integer=False):
    out = {}
    for p in kernel.signature.params:
        if p.name in sizes:
            out[p.name] = (rng.integers(-3, 4, sizes[p.name]).astype(np.float64) if integer
                           else rng.standard_normal(sizes[p.name]))
    return out


def _run_grad(g, launch, ints, arrays, seeds, emulate=False):
    args = {}
    for p in g.gpu.params:
        if p.name in ints:
            args[p.name] = ints[p.name]
        elif p.name in arrays:
            args[p.name] = arrays[p.name].copy()
        else:
            primal = p.name[2:]
            args[p.name] = seeds[primal].copy() if primal in seeds else np.zeros_like(arrays[primal])
    (g.emulate if emulate else g)[launch](**args)
    return args


def _kinds(g):
    """What each launch before the rest is: "sweep", "halo" (autodiff.sweep) or "tap"."""
    return [t.name.rsplit("_", 1)[1].rstrip("0123456789") for t in g.taps]


def _fd_check(mod, name, launch, ints, sizes, out, emulate=False, gather=True):
    """<d_in, v> against the central difference of <w, out after K> along v, for each input."""
    k = getattr(mod, name)
    g = polypy.grad(k, gather=gather)
    assert isinstance(g, PhasedGradient), g
    rng = np.random.default_rng(sum(sizes.values()))
    arrays = _arrays(k, sizes, rng)
    w = rng.standard_normal(sizes[out])
    got = _run_grad(g, launch, ints, arrays, {out: w}, emulate=emulate)

    def loss(x):
        a = {key: v.copy() for key, v in x.items()}
        k[launch](**ints, **a)
        return float(np.dot(w, a[out]))

    checked = 0
    for name_in in arrays:
        if name_in == out:
            continue
        v = rng.standard_normal(sizes[name_in])
        h = 1e-5
        plus = dict(arrays, **{name_in: arrays[name_in] + h * v})
        minus = dict(arrays, **{name_in: arrays[name_in] - h * v})
        fd = (loss(plus) - loss(minus)) / (2 * h)
        ad = float(np.dot(got["d_" + name_in], v))
        assert abs(fd) > 1e-3 and abs(fd - ad) <= 1e-7 * max(1.0, abs(fd)), (name_in, fd, ad)
        checked += 1
    assert checked
    assert np.all(got["d_" + out] == np.where(got["d_" + out] == 0, 0, w))  # consumed seeds are zero
    return g


@pytest.mark.parametrize("grid,block,n", [(1, 32, 30), (4, 8, 29), (7, 5, 35), (3, 16, 40)])
def test_1d_stencil_matches_finite_differences(tmp_path, grid, block, n) -> None:
    mod = _module(tmp_path, "smooth", STENCIL_1D)
    g = _fd_check(mod, "smooth", ((grid,), (block,)), {"n": n}, {"a": n, "b": n}, "b")
    # 3 indices of the input in one sweep; the halo of a[i - 1] (owners past the launch's end)
    # in a launch of its own; a[i + 1]'s is empty (isl: its owners would be below i = 1)
    assert _kinds(g) == ["sweep", "halo"]


@pytest.mark.parametrize("grid,block,ni", [((5, 4), (8, 4), 15), ((3, 7), (16, 2), 13), ((40, 1), (1, 16), 16),
                                           ((2, 2), (32, 8), 16)])
def test_2d_stencil_matches_finite_differences_on_non_square_launches(tmp_path, grid, block, ni) -> None:
    mod = _module(tmp_path, "conv", STENCIL_2D)
    g = _fd_check(mod, "conv", (grid, block), {"ni": ni}, {"A": ni * 40, "B": ni * 40}, "B")
    assert _kinds(g) == ["sweep", "halo", "halo", "halo"]  # 6 indices of the input, 3 empty halos left out


def test_2d_stencil_emulated_matches_finite_differences(tmp_path) -> None:
    mod = _module(tmp_path, "conv", STENCIL_2D)
    _fd_check(mod, "conv", ((5, 3), (8, 4)), {"ni": 11}, {"A": 11 * 40, "B": 11 * 40}, "B", emulate=True)


@pytest.mark.parametrize("grid,block,ni", [((2, 3, 4), (5, 4, 2), 8), ((1, 2, 9), (10, 8, 1), 9)])
def test_3d_stencil_matches_finite_differences(tmp_path, grid, block, ni) -> None:
    mod = _module(tmp_path, "heat", STENCIL_3D)
    g = _fd_check(mod, "heat", (grid, block), {"ni": ni}, {"A": ni * 120, "B": ni * 120}, "B")
    assert _kinds(g) == ["sweep"] + ["halo"] * 3  # 7 indices of the input; the halos of the 3 shifts down


@pytest.mark.parametrize("grid,block,n", [(1, 32, 25), (5, 7, 33)])
def test_coefficient_array_and_input_dependent_partials(tmp_path, grid, block, n) -> None:
    mod = _module(tmp_path, "weighted", COEFFICIENTS)
    report: list = []
    polypy.grad(mod.weighted, report=report)
    forms = {(d.buffer, d.strategy) for d in report if isinstance(d, Accumulation)}
    assert ("a", "gather") in forms and ("w", "plain") in forms, forms
    g = _fd_check(mod, "weighted", ((grid,), (block,)), {"n": n}, {"a": n, "w": n, "b": n}, "b")
    assert _kinds(g)[0] == "sweep"  # 3 indices of the input (a[i + 1] read twice)


@pytest.mark.parametrize("name,text,launch,ints,sizes", [
    ("smooth", STENCIL_1D, ((6,), (7,)), {"n": 40}, {"a": 40, "b": 40}),
    ("conv", STENCIL_2D, ((6, 5), (8, 4)), {"ni": 17}, {"A": 17 * 40, "B": 17 * 40}),
    ("heat", STENCIL_3D, ((2, 3, 5), (5, 4, 2)), {"ni": 9}, {"A": 9 * 120, "B": 9 * 120}),
])
def test_bit_for_bit_against_the_one_kernel_gradient(tmp_path, name, text, launch, ints, sizes) -> None:
    mod = _module(tmp_path, name, text)
    k = getattr(mod, name)
    gathered, one = polypy.grad(k), polypy.grad(k, gather=False)
    assert isinstance(gathered, PhasedGradient) and not isinstance(one, PhasedGradient)
    rng = np.random.default_rng(5)
    arrays = _arrays(k, sizes, rng, integer=True)
    out = [p for p in sizes if p in ("b", "B")][0]
    seeds = {out: rng.integers(-4, 5, sizes[out]).astype(np.float64)}
    inp = [p for p in sizes if p != out][0]
    arrays_d = {"d_" + inp: rng.integers(-4, 5, sizes[inp]).astype(np.float64)}  # accumulated into
    results = []
    for g in (gathered, one):
        args = {}
        for p in g.gpu.params:
            if p.name in ints:
                args[p.name] = ints[p.name]
            elif p.name in arrays:
                args[p.name] = arrays[p.name].copy()
            elif p.name[2:] in seeds:
                args[p.name] = seeds[p.name[2:]].copy()
            else:
                args[p.name] = arrays_d[p.name].copy()
        g[launch](**args)
        results.append({key: v for key, v in args.items() if isinstance(v, np.ndarray)})
    assert results[0].keys() == results[1].keys()
    for key in results[0]:
        assert np.array_equal(results[0][key], results[1][key]), key
    assert np.any(results[0]["d_" + inp] != arrays_d["d_" + inp])


def test_report_names_the_form(tmp_path) -> None:
    mod = _module(tmp_path, "conv", STENCIL_2D)
    report: list = []
    polypy.grad(mod.conv, report=report, gather="taps")
    forms = [d for d in report if isinstance(d, Accumulation) and d.buffer == "A"]
    assert len(forms) == 6 and all(d.strategy == "gather" for d in forms), [d.format() for d in forms]
    assert "plain +=" in forms[0].format() and "injective" in forms[0].format()
    one: list = []
    polypy.grad(mod.conv, report=one, gather=False)
    assert not any(isinstance(d, Accumulation) and d.strategy == "gather" for d in one)


def test_cli_report_says_what_the_cpu_path_does(tmp_path, capsys) -> None:
    from polypy.driver.cli import main

    src = tmp_path / "smooth.cu"
    src.write_text(STENCIL_1D)
    out = tmp_path / "smooth_grad.cu"
    assert main(["grad", str(src), "--kernel", "smooth", "--report", "-o", str(out)]) == 0
    err = capsys.readouterr()
    text = err.out + err.err
    assert "input a: when polypy runs the gradient on the CPU" in text and "gather form" in text, text
    assert "smooth_grad_a_tap" not in out.read_text()  # the CUDA output keeps one kernel K_grad


def _forms(mod, name):
    report: list = []
    g = polypy.grad(getattr(mod, name), report=report)
    return g, {d.buffer: d for d in report if isinstance(d, Accumulation)}


@pytest.mark.parametrize("grid,block", [((3,), (8,)), ((1,), (32,))])
def test_input_written_by_the_kernel_keeps_todays_form(tmp_path, grid, block) -> None:
    mod = _module(tmp_path, "pairs", WRITES_INPUT)
    g, forms = _forms(mod, "pairs")
    assert not isinstance(g, PhasedGradient)
    assert forms["a"].strategy != "gather"
    n = 20
    rng = np.random.default_rng(2)
    a, w, v = rng.standard_normal(2 * n + 1), rng.standard_normal(n), rng.standard_normal(2 * n + 1)

    def loss(x):
        aa, bb = x.copy(), np.zeros(n)
        mod.pairs[grid, block](aa, bb, n)
        return float(np.dot(w, bb) + np.dot(w[:n], aa[:n]))

    seeds_a = np.zeros(2 * n + 1)
    seeds_a[:n] = w[:n]
    args = {"a": a.copy(), "d_a": seeds_a, "b": np.zeros(n), "d_b": w.copy(), "n": n}
    g[grid, block](**args)
    fd = (loss(a + 1e-5 * v) - loss(a - 1e-5 * v)) / 2e-5
    assert abs(fd - float(np.dot(args["d_a"], v))) < 1e-7 * max(1.0, abs(fd))


@pytest.mark.parametrize("name,text,gathered", [("accumulate", IN_OUT, True), ("twice", READ_AFTER, False)])
def test_outputs_read_by_the_kernel(tmp_path, name, text, gathered) -> None:
    mod = _module(tmp_path, name, text)
    g, forms = _forms(mod, name)
    assert isinstance(g, PhasedGradient) == gathered
    if gathered:
        assert forms["a"].strategy == "gather"
    else:
        assert forms["a"].strategy != "gather"
        assert "no gather form: its contribution reads d_b, and b is read by the kernel after its store" \
            in forms["a"].reason, forms["a"].reason
    n, launch = 30, ((4,), (8,))
    rng = np.random.default_rng(4)
    a, b0, wb, wc, v = (rng.standard_normal(n) for _ in range(5))
    outputs = [p.name for p in getattr(mod, name).signature.params if p.name in ("b", "c")]

    def loss(x):
        arrays = {"b": b0.copy(), "c": np.zeros(n)}
        getattr(mod, name)[launch](x.copy(), *(arrays[o] for o in outputs), n)
        return float(np.dot(wb, arrays["b"]) + (np.dot(wc, arrays["c"]) if "c" in outputs else 0.0))

    args = {"a": a.copy(), "d_a": np.zeros(n), "b": b0.copy(), "d_b": wb.copy(), "n": n}
    if "c" in outputs:
        args.update(c=np.zeros(n), d_c=wc.copy())
    g[launch](**args)
    fd = (loss(a + 1e-5 * v) - loss(a - 1e-5 * v)) / 2e-5
    assert abs(fd) > 1e-3 and abs(fd - float(np.dot(args["d_a"], v))) < 1e-7 * max(1.0, abs(fd))


# PolyBench's form: rows of the macro's length, columns bounded by an argument; isl proves the
# taps (and the output's seeds) private only where nj <= NJ + 1, tested once per launch
RUNTIME_BOUND = r"""
#define NJ 24
__global__ void conv_n(int ni, int nj, const double* A, double* B) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < ni - 1 && j < nj - 1 && i > 0 && j > 0)
    B[i * NJ + j] = 0.5 * A[(i - 1) * NJ + j] - 0.25 * A[i * NJ + j + 1] + 3.0 * A[(i + 1) * NJ + j - 1];
}
"""


@pytest.mark.parametrize("grid,block,ni,nj", [((2, 3), (16, 8), 20, 24), ((7, 2), (4, 8), 13, 17)])
def test_taps_under_a_run_time_condition(tmp_path, grid, block, ni, nj) -> None:
    mod = _module(tmp_path, "conv_n", RUNTIME_BOUND)
    g = _fd_check(mod, "conv_n", (grid, block), {"ni": ni, "nj": nj}, {"A": ni * 24, "B": ni * 24}, "B",
                  gather="taps")
    assert len(g.taps) == 2  # 3 indices of the input: the last one's updates run in the rest
    assert all(len(t.gpu.body) == 1 and isinstance(t.gpu.body[0], ir.If) for t in g.taps)
    atomics = [x for x in walk(g.gpu) if isinstance(x, ir.AtomicRMW)]
    assert len(atomics) == 3  # the rest: the updates where the condition does not hold


# one plane `i` of a 3-D array per launch, bounds from arguments, many taps (a long expression
# that differentiation splits into named parts, declared in both copies of the rest's body)
PLANE = r"""
#define NJ 9
#define NK 11
__global__ void plane(int ni, int nj, int nk, const double* A, double* B, int i) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  int j = blockIdx.y * blockDim.y + threadIdx.y;
  if (i > 0 && j > 0 && k > 0 && i < ni - 1 && j < nj - 1 && k < nk - 1)
    B[(i * NJ + j) * NK + k] = 2.0 * A[((i - 1) * NJ + j - 1) * NK + k - 1] - 3.0 * A[((i + 1) * NJ + j - 1) * NK + k]
        + 0.5 * A[((i - 1) * NJ + j) * NK + k + 1] + 4.0 * A[((i + 1) * NJ + j + 1) * NK + k - 1]
        - 0.25 * A[(i * NJ + j - 1) * NK + k] + 1.5 * A[(i * NJ + j) * NK + k] - A[(i * NJ + j + 1) * NK + k + 1]
        + 6.0 * A[((i - 1) * NJ + j + 1) * NK + k] - 0.75 * A[((i + 1) * NJ + j) * NK + k + 1]
        + 8.0 * A[((i - 1) * NJ + j - 1) * NK + k + 1] - 5.0 * A[((i + 1) * NJ + j + 1) * NK + k + 1];
}
"""


@pytest.mark.parametrize("grid,block,i", [((3, 2), (4, 8), 3), ((1, 3), (16, 4), 1)])
def test_many_taps_under_a_run_time_condition(tmp_path, grid, block, i) -> None:
    mod = _module(tmp_path, "plane", PLANE)
    ints = {"ni": 6, "nj": 9, "nk": 11, "i": i}
    g = _fd_check(mod, "plane", (grid, block), ints, {"A": 6 * 99, "B": 6 * 99}, "B")
    # the planes i - 1, i, i + 1 (i an argument) are three classes of translations: one sweep each
    assert _kinds(g).count("sweep") == 3 and "tap" not in _kinds(g)
    body = g.gpu.body
    assert len(body) == 1 and isinstance(body[0], ir.If) and body[0].then and body[0].orelse  # tested once


def test_seeds_of_outputs_the_kernel_reads_before_writing() -> None:
    """``autodiff.gather.seed_exact`` on small kernels: read-modify-write and stores in the two
    branches of one ``if`` keep the seed exact; a read after the store, two stores one thread
    runs, a store in a loop do not."""
    from autodiff.gather import seed_exact
    from polypy.ir.types import F64, I32, PointerType

    f64 = F64
    i = ir.Var("i", I32)
    load = ir.Load("b", (i,), f64)
    one = ir.Const(1.0, f64)

    def kernel(*body):
        return ir.Kernel("k", (ir.Param("b", PointerType(f64)), ir.Param("i", I32)), (), tuple(body), "gpu")

    rmw = ir.Store("b", (i,), ir.Binary("sub", load, one))
    assert seed_exact(kernel(rmw), "b", (True, None))[0]
    cond = ir.Binary("lt", i, ir.Const(3, I32))
    branches = ir.If(cond, (ir.Store("b", (i,), one),), (rmw,))
    assert seed_exact(kernel(branches), "b", (True, None))[0]
    assert seed_exact(kernel(branches), "b", (False, cond)) == (True, "", cond)
    assert not seed_exact(kernel(branches), "b", (False, None))[0]
    after = ir.Decl("x", f64, load)
    assert "after its store" in seed_exact(kernel(ir.Store("b", (i,), one), after), "b", (True, None))[1]
    assert "twice" in seed_exact(kernel(ir.Store("b", (i,), one), rmw), "b", (True, None))[1]
    loop = ir.For("t", I32, ir.Const(0, I32), ir.Const(2, I32), ir.Const(1, I32), (ir.Store("b", (i,), one),))
    assert "loop" in seed_exact(kernel(loop), "b", (True, None))[1]


# an element every thread reads (its adjoint is reduced over the block at the end of K_grad,
# in a loop the taps must not keep) beside a stencil input
UNIFORM = r"""
__global__ void scaled(const double* s, const double* a, double* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1)
    b[i] = s[0] * (a[i - 1] - 0.5 * a[i + 1]);
}
"""


@pytest.mark.parametrize("grid,block,n", [(3, 16, 40), (5, 8, 37)])
def test_block_reduced_element_beside_a_gathered_input(tmp_path, grid, block, n) -> None:
    mod = _module(tmp_path, "scaled", UNIFORM)
    _, forms = _forms(mod, "scaled")
    assert forms["a"].strategy == "gather"
    assert forms["s"].strategy == "block-reduction" and "no gather form: isl does not prove" in forms["s"].reason
    g = _fd_check(mod, "scaled", ((grid,), (block,)), {"n": n}, {"s": 1, "a": n, "b": n}, "b")
    assert _kinds(g)[0] == "sweep"  # 2 indices of the input


def test_through_polypy_torch(tmp_path) -> None:
    torch = pytest.importorskip("torch", reason="polypy.torch needs PyTorch")
    import polypy.torch

    mod = _module(tmp_path, "smooth", STENCIL_1D)
    smooth = polypy.torch.function(mod.smooth, inputs=["a"], outputs={"b": "a"},
                                   params={"n": lambda a: a.numel()}, grid=lambda a: (a.numel() + 7) // 8, block=8)
    a = torch.randn(37, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(smooth, (a,))
    assert isinstance(smooth.gradient, PhasedGradient)


def test_a_refused_launch_changes_nothing(tmp_path) -> None:
    """An array too small for the launch is refused before any of the launches runs (``b``,
    which only the last launch, the rest, writes)."""
    mod = _module(tmp_path, "smooth", STENCIL_1D)
    g = polypy.grad(mod.smooth)
    n = 40
    args = {"a": np.ones(n), "d_a": np.zeros(n), "b": np.zeros(n - 5), "d_b": np.ones(n), "n": n}
    with pytest.raises(polypy.UserError, match="'b'"):
        g[(5,), (8,)](**args)
    assert not args["d_a"].any() and args["d_b"].all()


def test_refusals_are_the_usual_ones(tmp_path) -> None:
    from polypy.driver.gathered import gather_gradient
    from polypy.driver.gradients import grad_kernel, privacy_oracle

    mod = _module(tmp_path, "smooth", STENCIL_1D)
    with pytest.raises(polypy.UserError, match="no kernel named 'nope'"):
        gather_gradient(mod.gpu, "nope", grad_kernel, privacy_oracle)
    with pytest.raises(polypy.UserError, match="zz"):
        polypy.grad(mod.smooth, wrt=["zz"])


# two inputs read as stencils (FDTD's third step): the j-th taps of both share a launch
TWO_INPUTS = r"""
__global__ void curl(const double* ex, const double* ey, double* hz, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n - 1)
    hz[i] = hz[i] - 0.75 * (ex[i + 1] - ex[i] + ey[i + 1] - 2.0 * ey[i]);
}
"""


@pytest.mark.parametrize("grid,block,n", [(3, 16, 40), (6, 5, 29)])
def test_taps_of_two_inputs_share_launches(tmp_path, grid, block, n) -> None:
    mod = _module(tmp_path, "curl", TWO_INPUTS)
    _, forms = _forms(mod, "curl")
    assert forms["ex"].strategy == "gather" and forms["ey"].strategy == "gather"
    k, g = mod.curl, polypy.grad(mod.curl, gather="taps")
    assert isinstance(g, PhasedGradient) and len(g.taps) == 1  # ex[i + 1] and ey[i + 1]; the rest: ex[i], ey[i]
    rng = np.random.default_rng(n)
    arrays = {name: rng.integers(-3, 4, n).astype(np.float64) for name in ("ex", "ey", "hz")}
    seeds = {"hz": rng.integers(-3, 4, n).astype(np.float64)}
    launch = ((grid,), (block,))
    got, want = (_run_grad(x, launch, {"n": n}, arrays, seeds) for x in (g, polypy.grad(k, gather=False)))
    for key in got:
        assert np.array_equal(np.asarray(got[key]), np.asarray(want[key])), key
    ex = np.zeros(n)
    ex[1:n] += -0.75 * seeds["hz"][:n - 1]
    ex[:n - 1] += 0.75 * seeds["hz"][:n - 1]
    np.testing.assert_array_equal(got["d_ex"], ex)
