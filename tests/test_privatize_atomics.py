"""Atomic-only buffers accumulated per CPU worker (``gpu2cpu.privatize_atomics`` marks them,
``codegen.llvm.jit`` gives each worker thread a private copy and adds the copies in at the end).

* the pass marks exactly the pointer parameters touched only by ``atomicAdd`` with the result
  unused (a buffer also read, an atomic whose old value is used, another atomic operation: not);
* a kernel whose output is atomic-add-only gives the emulator's result through the JIT -- exactly
  for ints, allclose for floats -- over several launch shapes and worker counts, with the private
  copies really used (and with launches on one thread, which add into the array directly);
* the gradients of vecnorm and layernorm (through ``polypy.grad``, LLVM JIT, float64) still match
  central finite differences, and vecnorm's ``d_in`` is marked.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from codegen.llvm import jit
from gpu2cpu.privatize_atomics import privatizable_atomics
from polypy.analysis.versions import plain_when
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.ir import nodes as ir
from polypy.ir.visitor import walk
from samples.spec import all_samples

KERNELS = r"""
__global__ void hist(const int* in, unsigned int* bins, int n, int nbins)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&bins[in[i] % nbins], 1u);
}

__global__ void spread(const float* x, float* acc, int n, int m)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&acc[i % m], x[i]);
        atomicAdd(&acc[(i * 7) % m], 0.5f * x[i]);
    }
}

__global__ void reads_too(const float* x, float* acc, float* out, int n, int m)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&acc[i % m], x[i]);
        out[i] = acc[0];
    }
}

__global__ void old_used(const float* x, float* acc, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = atomicAdd(&acc[0], x[i]);
}

__global__ void other_op(const int* in, int* hi, int* sum, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicMax(&hi[0], in[i]);
        atomicAdd(&sum[0], in[i]);
    }
}
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("privatize") / "atomics.cu"
    path.write_text(KERNELS)
    return str(path)


def _marked(path: str, name: str, **defines) -> tuple[str, ...]:
    kernel = to_cpu(polypy.load(path, defines=defines).kernel(name))
    assert kernel.private_atomics == privatizable_atomics(kernel)
    return kernel.private_atomics


def test_pass_marks_only_atomic_add_only_buffers(source) -> None:
    assert _marked(source, "hist") == ("bins",)
    assert _marked(source, "spread") == ("acc",)
    assert _marked(source, "reads_too") == ()  # acc is also read
    assert _marked(source, "old_used") == ()   # the old value is used
    assert _marked(source, "other_op") == ("sum",)  # hi takes atomicMax


def test_report_names_the_marked_buffer(source) -> None:
    report: list = []
    to_cpu(polypy.load(source).kernel("spread"), report=report)
    lines = [d.format() for d in report if "CPU worker" in d.format()]
    assert len(lines) == 1 and "'acc'" in lines[0] and "atomics.cu:" in lines[0], lines


@pytest.fixture
def always_parallel(monkeypatch) -> list:
    """Every launch on all its workers (no one-thread probes), and a record of the per-worker
    copies each launch made (None: kept its atomics, {}: one thread on the arrays)."""
    monkeypatch.setattr(jit, "SERIAL_BELOW_SECONDS", 0.0)
    monkeypatch.setattr(jit, "PROBE_BELOW_SECONDS", 0.0)
    seen: list = []
    original = jit.JitKernel._private_arrays

    def record(self, arrays, workers, launch_threads, *rest):
        copies = original(self, arrays, workers, launch_threads, *rest)
        seen.append(None if copies is None else {k: v.shape for k, v in copies.items()})
        return copies

    monkeypatch.setattr(jit.JitKernel, "_private_arrays", record)
    return seen


SHAPES = [((4,), (64,), 250), ((7,), (32,), 224), ((1,), (128,), 100), ((13,), (16,), 200)]


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_int_histogram_is_exact(source, always_parallel, threads) -> None:
    mod = polypy.compile(source, threads=threads)
    rng = np.random.default_rng(threads)
    for grid, block, n in SHAPES:
        values = rng.integers(0, 1000, n).astype(np.int32)
        start = rng.integers(0, 5, 9).astype(np.uint32)  # accumulates onto what is there
        got, want = start.copy(), start.copy()
        mod.hist[grid, block](values, got, n, 9)
        mod.hist.emulate[grid, block](values, want, n, 9)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got - start, np.bincount(values % 9, minlength=9))
    workers = [min(threads, g[0]) for g, _, _ in SHAPES]
    assert always_parallel == [{"bins": (w, 9)} if w > 1 else {} for w in workers]


@pytest.mark.parametrize("threads", [2, 4])
def test_float_accumulation_matches_emulator(source, always_parallel, threads) -> None:
    mod = polypy.compile(source, threads=threads)
    rng = np.random.default_rng(10 + threads)
    for grid, block, n in SHAPES:
        x = rng.standard_normal(n).astype(np.float32)
        start = rng.standard_normal(17).astype(np.float32)
        got, want = start.copy(), start.copy()
        mod.spread[grid, block](x, got, n, 17)
        mod.spread.emulate[grid, block](x, want, n, 17)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert any(c for c in always_parallel), "no launch used private copies"


def test_untouched_negative_zero_keeps_its_sign(source, always_parallel) -> None:
    mod = polypy.compile(source, threads=2)
    x = np.ones(64, dtype=np.float32)
    acc = np.full(100, -0.0, dtype=np.float32)  # n=64 < m: some elements get no add
    want = acc.copy()
    mod.spread[(2,), (32,)](x, acc, 64, 100)
    mod.spread.emulate[(2,), (32,)](x, want, 64, 100)
    assert always_parallel == [{"acc": (2, 100)}]
    assert np.any(want == 0) and np.array_equal(np.signbit(acc), np.signbit(want))
    np.testing.assert_array_equal(acc, want)


def test_large_buffer_or_shared_bytes_keep_atomics(source, always_parallel) -> None:
    mod = polypy.compile(source, threads=2)
    x = np.ones(64, dtype=np.float32)
    big = np.zeros(64 * 16 + 1, dtype=np.float32)  # more than 16 elements per launch thread / worker
    mod.spread[(2,), (32,)](x, big, 64, big.size)
    assert big.sum() == pytest.approx(96.0)
    both = np.ones(80, dtype=np.float32)  # acc's bytes are x's too: copies would change what x reads
    mod.spread[(2,), (32,)](both[:64], both[60:], 64, 20)
    assert always_parallel == [None, None]


def test_a_range_of_blocks_keeps_atomics(source, always_parallel) -> None:
    """``polypy.distributed`` runs block ranges on array headers over windows: nothing outside
    what the blocks touch may be written, so no copies are added in."""
    mod = polypy.compile(source, threads=2)
    code = mod.hist.for_block((32, 1, 1))
    values = np.arange(128, dtype=np.int32)
    bins = np.zeros(4, dtype=np.uint32)
    scalars = {"n": np.int32(128), "nbins": np.int32(4)}
    code.run((4, 1, 1), (32, 1, 1), 0, {"in": values, "bins": bins}, scalars, threads=2, blocks=(1, 3))
    assert always_parallel == [] and code.private == ("bins",)  # not even considered
    np.testing.assert_array_equal(bins, np.bincount(values[32:96] % 4, minlength=4))


def test_budget() -> None:
    assert not jit.private_copies({"a": (10, 4)}, 1, 1000)
    assert jit.private_copies({"a": (10, 4)}, 4, 1000)
    assert not jit.private_copies({"a": (5000, 4)}, 4, 1000)  # 20000 > 16 * 1000
    assert not jit.private_copies({"a": (1 << 22, 8)}, 4, 1 << 30)  # 128 MiB of copies
    # a thread adding 4 times to the array pays for 4 times the copy
    assert jit.private_copies({"a": (5000, 4)}, 4, 1000, {"a": 4})
    assert not jit.private_copies({"a": (5000, 4), "b": (5000, 4)}, 4, 1000, {"a": 4})


def test_adds_per_thread_counts_loops_and_takes_one_version_of_a_nest() -> None:
    """spmv's gradient adds to d_vals and d_x once per nonzero of its row: a loop whose trip count
    is in the matrix, counted UNKNOWN_TRIPS times; the 5-tap loop of a stencil 5 times."""
    spmv = next(s for s in all_samples() if s.name == "spmv_csr")
    g = polypy.grad(getattr(polypy.compile(spmv.source, defines=spmv.defines), spmv.kernel), wrt=list(spmv.wrt))
    adds = jit.adds_per_thread(to_cpu(g.gpu))
    # (at least: the loops over the threads split by ranges of rows add up, an overestimate)
    assert adds["d_vals"] >= jit.UNKNOWN_TRIPS and adds["d_x"] >= jit.UNKNOWN_TRIPS
    taps = load(None, text=TAPS5).kernel("taps5")
    assert jit.adds_per_thread(to_cpu(taps)) == {"out": 5}


TAPS5 = r"""
__global__ void taps5(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        for (int k = 0; k < 5; k++)
            atomicAdd(&out[(i + k) % n], x[i]);
}
"""


SAMPLES = {s.name: s for s in all_samples() if s.name in ("vecnorm", "layernorm")}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_gradient_matches_finite_differences(name, always_parallel) -> None:
    sample = SAMPLES[name]
    mod = polypy.compile(sample.source, defines={**sample.defines, "REAL": "double"}, threads=3)
    kernel = getattr(mod, sample.kernel)
    g = polypy.grad(kernel, wrt=list(sample.wrt))
    rng = np.random.default_rng(5)
    for case in sample.cases[:2]:
        args = sample.make_args(rng, case, np.float64)
        config = (case.grid, case.block, case.shmem)
        v = {p: rng.standard_normal(np.shape(args[p])) for p in sample.wrt}
        w = {p: rng.standard_normal(np.shape(args[p])) for p in sample.outputs}

        def f(sign: float, h: float = 1e-6) -> float:
            moved = {k: (a + sign * h * v[k] if k in v else np.copy(a) if isinstance(a, np.ndarray) else a)
                     for k, a in args.items()}
            kernel[config](**moved)
            return sum(float(np.dot(w[p], moved[p])) for p in sample.outputs)

        fd = (f(1.0) - f(-1.0)) / 2e-6
        call = {}
        for p in g.gpu.params:
            if p.name in args:
                call[p.name] = np.copy(args[p.name]) if isinstance(args[p.name], np.ndarray) else args[p.name]
            else:
                primal = p.name[2:]
                call[p.name] = (np.copy(w[primal]) if primal in w else np.zeros(np.shape(args[primal]) or (1,)))
        g[config](**call)
        reverse = sum(float(np.dot(v[p], call["d_" + p])) for p in sample.wrt)
        assert abs(fd) > 1e-6
        assert reverse == pytest.approx(fd, rel=1e-6, abs=1e-9)
    if name == "vecnorm":
        assert g.compiled.cpu.private_atomics == ("d_in",)
        assert any(c for c in always_parallel), "vecnorm's gradient used no private copies"


def _sample_gradient(name: str):
    s = {x.name: x for x in all_samples()}[name]
    mod = polypy.compile(s.source, defines={**s.defines, "REAL": "double"}, threads=2)
    return s, polypy.grad(getattr(mod, s.kernel), wrt=list(s.wrt))


def test_versioned_adjoints_are_privatized_only_for_launches_that_run_their_atomics(always_parallel) -> None:
    """A versioned gradient adds plainly where its privacy condition holds and atomically
    otherwise (matmul's A: blocks of one column; backprop's weights: blocks at most 16 wide whose
    columns end before hid). Both kinds of add may go to per-worker copies; a launch that makes
    the condition true runs no atomic, and gets no copy."""
    cpu = to_cpu(load(None, text=VERSIONED).kernel("versioned"))
    assert privatizable_atomics(cpu) == ("acc",)
    assert "acc" in dict(plain_when(cpu, ("acc",)))
    s, g = _sample_gradient("backprop_layerforward")
    assert {"d_weights", "d_input"} <= set(g.compiled.cpu.private_atomics)
    cpu = g.compiled.cpu
    assert {"d_weights", "d_input"} <= {name for name, _ in plain_when(cpu, cpu.private_atomics)}
    rng = np.random.default_rng(3)
    for case, plain in ((s.cases[0], True), (s.cases[1], False)):
        args = s.make_args(rng, case, np.float64)
        grid, block = (tuple(case.grid) + (1, 1))[:3], (tuple(case.block) + (1, 1))[:3]
        compiled = g.compiled.for_launch(grid, block)
        free = compiled._atomic_free(grid, block, {k: np.int32(v) for k, v in args.items()
                                                   if isinstance(v, (int, np.integer))})
        assert ("d_input" in free) == plain  # gridDim.x <= 1 (Rodinia's launch) or not
        assert "d_weights" in free  # 16-wide blocks, columns inside hid: every case


# One buffer updated plainly under a condition of the launch, atomically otherwise (the shape of
# a versioned gradient's adjoint; written anew for this test): with n <= m every thread has its
# own element.
VERSIONED = r"""
__global__ void versioned(const float* x, float* acc, int n, int m)
{
    bool alone = n <= m;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        if (alone)
            acc[i] = acc[i] + x[i];
        else
            atomicAdd(&acc[i % m], x[i]);
    }
}
"""


@pytest.mark.parametrize("m, copies", [(256, None), (64, {"acc": (2, 64)})])
def test_a_versioned_buffer_gets_copies_only_where_its_atomics_run(always_parallel, m, copies) -> None:
    mod = polypy.compile(None, text=VERSIONED, threads=2)
    n_ = 256
    x = np.random.default_rng(m).standard_normal(n_).astype(np.float32)
    got, want = np.zeros(m, np.float32), np.zeros(m, np.float32)
    mod.versioned[4, 64](x, got, n_, m)
    mod.versioned.emulate[4, 64](x, want, n_, m)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert always_parallel[-1] == copies


def test_a_block_windows_flush_is_not_a_version() -> None:
    """A block window's flush adds plainly where no other block reads the element and atomically
    elsewhere, element by element: not a condition of the launch, so its plain adds keep the
    array from per-worker copies (which would cost what the plain adds save)."""
    s, g = _sample_gradient("constant_coeffs")
    cpu = g.compiled.cpu
    flushed = [x for x in walk(cpu) if isinstance(x, ir.Store) and x.buffer == "d_x"]
    assert flushed  # the window's plain adds
    assert "d_x" not in cpu.private_atomics
    assert plain_when(cpu, ("d_x",)) == ()
