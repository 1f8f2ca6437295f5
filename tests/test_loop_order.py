"""Loop order chosen by the access strides (``polypy.analysis.loop_order``, used by sink-thread-loops and
``codegen.lanes``).

A thread that walks its own row in a serial loop (``acc += a[i*m + k] * a[j*m + k]``, PolyBench
SYRK, SYR2K, GESUMMV, ATAX's first kernel, ADI's sweeps) keeps that loop innermost: its reads are
contiguous and the loop over the threads stays outside. A thread that walks a column
(``y[j] += A[i*m + j] * w[i]``) gets the loop over the threads innermost (it vectorizes). A
serial loop that holds a barrier keeps the threads inside it whatever the model prefers (the
interchange is not legal), and ``--report`` says so.

Every kernel is checked against NumPy and against the emulator (the GPU form: each thread's
sums in its own order, so the results must agree bit for bit) through the LLVM JIT and the C
backend, on several launch shapes (partial blocks included). Never timings.
"""
from __future__ import annotations

import numpy as np
import pytest

from c_support import cuda_source, run_c, run_emulated

from polypy.analysis.loop_order import choose_order, contiguous, stride
from polypy.driver.cli import main
from polypy.driver.pipelines import to_cpu
from polypy.ir import nodes as n
from polypy.ir.types import F32, I32
from polypy.ir.visitor import walk_block

SOURCE = r"""
// SYRK's shape: thread (i, j) sums row i times row j of a.
__global__ void row_dot(int n, int m, float alpha, float beta, const float* a, float* c) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < n && j < n) {
    c[i * n + j] *= beta;
    for (int k = 0; k < m; k++)
      c[i * n + j] += alpha * a[i * m + k] * a[j * m + k];
  }
}

// GESUMMV's shape: two sums kept in registers, each thread its own rows of A and B.
__global__ void row_sums(int n, int m, const float* A, const float* B, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float t = 0.0f, u = 0.0f;
    for (int j = 0; j < m; j++) {
      t += A[i * m + j] * x[j];
      u += B[i * m + j] * x[j];
    }
    y[i] = 1.5f * t + 0.25f * u;
  }
}

// ATAX's second kernel: each thread walks a column; consecutive threads, consecutive elements.
__global__ void col_sums(int n, int m, const float* A, const float* w, float* y) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < m) {
    y[j] = 0.0f;
    for (int i = 0; i < n; i++)
      y[j] += A[i * m + j] * w[i];
  }
}

// ADI's forward sweep: a recurrence along each thread's own row.
__global__ void row_sweep(int n, int m, float* X, const float* A, const float* B) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) {
    for (int k = 1; k < m; k++)
      X[r * m + k] = X[r * m + k] - X[r * m + k - 1] * A[r * m + k] / B[r * m + k - 1];
  }
}

// A row of a known length: the loop over the threads around it must not be vectorized.
__global__ void row_fixed(const float* a, const float* w, float* out) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (int k = 0; k < 64; k++)
    acc += a[r * 64 + k] * w[k];
  out[r] = acc;
}

// Each thread walks its own row, but the threads exchange values through shared memory at every
// step: the barriers make each step of every thread come before the next step of any.
__global__ void row_exchange(int m, const float* a, float* out) {
  __shared__ float s[256];
  int t = threadIdx.x;
  int j = blockIdx.x * blockDim.x + t;
  float acc = 0.0f;
  for (int k = 0; k < m; k++) {
    s[t] = a[j * m + k];
    __syncthreads();
    acc += s[(t + 1) % blockDim.x] * s[t];
    __syncthreads();
  }
  out[j] = acc;
}
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    directory = tmp_path_factory.mktemp("order")
    compiled, _ = cuda_source(directory, "order.cu", SOURCE, "row_dot")
    import polypy

    loaded = polypy.load(str(directory / "order.cu"))
    return compiled, loaded, directory / "order.cu"


def _data(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(np.float32)


def _check(kernels, name: str, grid, block, args: dict, want: dict, rtol: float = 2e-5) -> None:
    """``name`` through the emulator, the LLVM JIT and the C backend: the three agree exactly
    (each thread sums in its own order) and with NumPy's ``want`` to ``rtol``."""
    compiled, loaded, _ = kernels
    kernel = loaded.kernel(name)
    emulated = run_emulated(kernel, grid, block, args)
    jit = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    getattr(compiled, name)[grid, block](**jit)
    c = run_c(kernel, grid, block, args)
    for key, value in want.items():
        np.testing.assert_allclose(emulated[key], value, rtol=rtol, atol=1e-5, err_msg=f"{name}: {key} (emulator)")
        np.testing.assert_array_equal(jit[key], emulated[key], err_msg=f"{name}: {key} (LLVM)")
        np.testing.assert_array_equal(c[key], emulated[key], err_msg=f"{name}: {key} (C)")


def _serial_loops(kernel: n.Kernel, var: str) -> list[n.For]:
    return [x for x in walk_block(kernel.body) if isinstance(x, n.For) and x.kind == "serial" and x.var.startswith(var)]


def _is_tx_loop(x: n.Node) -> bool:
    return isinstance(x, n.For) and x.kind == "threads" and x.var.startswith("tx")


def _holds_thread_loop(loop: n.For) -> bool:
    """Whether a loop over tx runs inside ``loop``."""
    return any(_is_tx_loop(x) for x in walk_block(loop.body))


def _inside_thread_loop(kernel: n.Kernel, loop: n.For) -> bool:
    """Whether ``loop`` runs inside a loop over tx."""
    return any(_is_tx_loop(t) and any(x is loop for x in walk_block(t.body)) for t in walk_block(kernel.body))


# --------------------------------------------------------------------------- the order chosen


@pytest.mark.parametrize("name,var", [("row_dot", "k"), ("row_sums", "j"), ("row_sweep", "k")])
def test_a_thread_walking_its_own_row_keeps_its_loop_innermost(kernels, name, var) -> None:
    cpu = to_cpu(kernels[1].kernel(name))
    loops = _serial_loops(cpu, var)
    assert loops
    for loop in loops:
        assert not _holds_thread_loop(loop), f"{name}: a loop over the threads inside '{loop.var}'"
        assert _inside_thread_loop(cpu, loop), f"{name}: '{loop.var}' not inside a loop over the threads"


def test_a_thread_walking_a_column_gets_the_threads_innermost(kernels) -> None:
    cpu = to_cpu(kernels[1].kernel("col_sums"))
    loops = _serial_loops(cpu, "i")
    assert loops and any(_holds_thread_loop(loop) and not _inside_thread_loop(cpu, loop) for loop in loops)


def test_a_barrier_in_the_row_loop_keeps_the_threads_inside(kernels) -> None:
    cpu = to_cpu(kernels[1].kernel("row_exchange"))
    loops = _serial_loops(cpu, "k")
    assert loops and all(_holds_thread_loop(loop) and not _inside_thread_loop(cpu, loop) for loop in loops)


# --------------------------------------------------------------------------- results


@pytest.mark.parametrize("n_,m,block", [(40, 37, (16, 4)), (64, 64, (32, 8)), (17, 5, (8, 8)), (33, 1, (32, 2))])
def test_row_dot(kernels, n_, m, block) -> None:
    a = _data(1, n_, m)
    c = _data(2, n_, n_)
    alpha, beta = np.float32(1.25), np.float32(0.5)
    want = c.astype(np.float64) * beta + alpha * (a.astype(np.float64) @ a.astype(np.float64).T)
    grid = ((n_ + block[0] - 1) // block[0], (n_ + block[1] - 1) // block[1])
    _check(kernels, "row_dot", grid, block, {"n": n_, "m": m, "alpha": alpha, "beta": beta, "a": a.ravel(),
                                             "c": c.ravel()}, {"c": want.ravel()}, rtol=1e-4)


@pytest.mark.parametrize("n_,m,block", [(100, 33, 32), (256, 64, 256), (7, 129, 64)])
def test_row_sums(kernels, n_, m, block) -> None:
    A, B, x = _data(3, n_, m), _data(4, n_, m), _data(5, m)
    y = np.zeros(n_, np.float32)
    want = 1.5 * (A.astype(np.float64) @ x) + 0.25 * (B.astype(np.float64) @ x)
    grid = (n_ + block - 1) // block
    _check(kernels, "row_sums", grid, block, {"n": n_, "m": m, "A": A.ravel(), "B": B.ravel(), "x": x, "y": y},
           {"y": want}, rtol=1e-4)


@pytest.mark.parametrize("n_,m,block", [(30, 100, 32), (64, 256, 128), (9, 5, 16)])
def test_col_sums(kernels, n_, m, block) -> None:
    A, w = _data(6, n_, m), _data(7, n_)
    y = np.full(m, 9.0, np.float32)
    want = A.astype(np.float64).T @ w
    grid = (m + block - 1) // block
    _check(kernels, "col_sums", grid, block, {"n": n_, "m": m, "A": A.ravel(), "w": w, "y": y}, {"y": want},
           rtol=1e-4)


@pytest.mark.parametrize("n_,m,block", [(50, 20, 32), (64, 9, 64), (5, 40, 8)])
def test_row_sweep(kernels, n_, m, block) -> None:
    X = _data(8, n_, m)
    A = _data(9, n_, m)
    B = (np.abs(_data(10, n_, m)) + 1.0).astype(np.float32)
    want = X.copy()
    for k in range(1, m):  # float32, each row in k order, as every thread does
        want[:, k] = want[:, k] - want[:, k - 1] * A[:, k] / B[:, k - 1]
    grid = (n_ + block - 1) // block
    _check(kernels, "row_sweep", grid, block, {"n": n_, "m": m, "X": X.ravel(), "A": A.ravel(), "B": B.ravel()},
           {"X": want.ravel()})


@pytest.mark.parametrize("blocks,block,m", [(3, 32, 7), (1, 64, 20), (2, 8, 1)])
def test_row_exchange(kernels, blocks, block, m) -> None:
    total = blocks * block
    a = _data(11, total, m)
    out = np.zeros(total, np.float32)
    rows = a.reshape(blocks, block, m)
    want = (np.roll(rows, -1, axis=1) * rows).sum(axis=2).astype(np.float64).ravel()
    _check(kernels, "row_exchange", blocks, block, {"m": m, "a": a.ravel(), "out": out}, {"out": want}, rtol=1e-4)


@pytest.mark.parametrize("blocks,block", [(2, 32), (3, 16)])
def test_row_fixed(kernels, blocks, block) -> None:
    a, w = _data(12, blocks * block, 64), _data(13, 64)
    out = np.zeros(blocks * block, np.float32)
    want = a.astype(np.float64) @ w
    _check(kernels, "row_fixed", blocks, block, {"a": a.ravel(), "w": w, "out": out}, {"out": want}, rtol=1e-4)


def test_no_vector_loop_over_threads_walking_their_rows(kernels) -> None:
    """The loop over tx around a long row loop (a constant 64 here) is no vector loop: GCC's
    ``omp simd`` would vectorize it with a gather per lane at every step of the row loop."""
    from codegen.lanes import vector_loop

    for name, vector in (("row_fixed", False), ("col_sums", True)):
        cpu = to_cpu(kernels[1].kernel(name))
        loops = [x for x in walk_block(cpu.body) if _is_tx_loop(x) and
                 any(isinstance(y, n.For) and y.kind == "serial" for y in walk_block(x.body))]
        inner = [x for x in walk_block(cpu.body) if _is_tx_loop(x) and _serial_loops(cpu, "i")
                 and any(x is y for loop in _serial_loops(cpu, "i") for y in walk_block(loop.body))]
        if vector:
            assert inner and all(vector_loop(cpu, x) is not None for x in inner)
        else:
            assert loops and all(vector_loop(cpu, x) is None for x in loops)


def test_threads_walking_rows_are_jammed_when_specialized(kernels) -> None:
    """Specialized for a block shape (``jam-threads``), four threads' row loops run as one: four
    sums in flight, each in its thread's own order; the results stay those of the emulator."""
    from polypy.passes.specialize import specialize_for_block

    compiled, loaded, _ = kernels
    cpu = specialize_for_block(to_cpu(loaded.kernel("row_sums")), (64, 1, 1))
    jammed = [x for x in walk_block(cpu.body) if _is_tx_loop(x) and isinstance(x.step, n.Const) and x.step.value == 4]
    assert jammed
    for loop in jammed:
        # One row loop for the four threads (where all four are in range): t and u of each.
        rows = [x for x in walk_block(loop.body) if isinstance(x, n.For) and x.kind == "serial"]
        assert any(len({x.name for x in walk_block(r.body) if isinstance(x, n.Assign)}) == 8 for r in rows)
    n_, m = 200, 45
    A, B, x = _data(14, n_, m), _data(15, n_, m), _data(16, m)
    args = {"n": n_, "m": m, "A": A.ravel(), "B": B.ravel(), "x": x, "y": np.zeros(n_, np.float32)}
    want = run_emulated(loaded.kernel("row_sums"), 4, 64, args)
    got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    compiled.row_sums[4, 64](**got)
    np.testing.assert_array_equal(got["y"], want["y"])


# --------------------------------------------------------------------------- the report


def test_report_states_the_order_and_why(kernels, tmp_path, capsys) -> None:
    path = kernels[2]
    assert main(["translate", str(path), "--emit", "c", "--report", "-o", str(tmp_path / "order.c")]) == 0
    err = capsys.readouterr().err
    row = [line for line in err.splitlines() if "row_dot" in line and "'k' innermost" in line]
    assert len(row) == 1 and "the serial loop 'k' stays inside it" in row[0]
    assert "walking 'k' none of them is strided" in row[0] and "walking tx 1 strided" in row[0]
    assert "a[" in row[0] and "* m + k]" in row[0]
    col = [line for line in err.splitlines() if "col_sums" in line and "tx innermost in 'i'" in line]
    assert len(col) == 1 and "walking 'i' 1 strided" in col[0] and "walking tx none of them is strided" in col[0]
    barrier = [line for line in err.splitlines() if "row_exchange" in line and "barrier inside it" in line]
    line = SOURCE.split("\n").index("  for (int k = 0; k < m; k++) {") + 1  # row_exchange's loop
    assert len(barrier) == 1 and "'k' cannot go innermost" in barrier[0] and f"order.cu:{line}:3:" in barrier[0]


# --------------------------------------------------------------------------- the model's parts


def _v(name: str) -> n.Var:
    return n.Var(name, I32)


def _c(value: int) -> n.Const:
    return n.Const(value, I32)


def test_strides_are_exact_derivatives() -> None:
    j = n.Binary("add", n.Binary("mul", _v("bx"), _c(32)), _v("tx"))
    lets = {"j": j}
    row = n.Binary("add", n.Binary("mul", _v("j"), _v("m")), _v("k"))  # j * m + k
    assert stride(row, "k", lets, ()) == 1
    assert stride(row, "tx", lets, ()) is None  # times m, not a constant
    assert stride(n.Binary("mul", _v("j"), _c(-3)), "tx", lets, ()) == -3
    assert stride(n.Binary("sub", _c(10), _v("j")), "tx", lets, ()) == -1
    assert stride(_v("acc"), "k", {}, {"acc"}) is None  # changes with k in a way not known
    assert stride(n.Binary("div", _v("tx"), _c(2)), "tx", {}, ()) is None
    assert contiguous((_v("ty"), _v("tx")), "tx", {}, ())
    assert not contiguous((_v("tx"), _v("ty")), "tx", {}, ())


def test_a_tie_keeps_the_threads_innermost() -> None:
    # acc += a[k * 64 + tx] * b[tx * 64 + k]: one strided access either way -> tx innermost
    a = n.Load("a", (n.Binary("add", n.Binary("mul", _v("k"), _c(64)), _v("tx")),), F32)
    b = n.Load("b", (n.Binary("add", n.Binary("mul", _v("tx"), _c(64)), _v("k")),), F32)
    body = (n.Assign("acc", n.Binary("add", n.Var("acc", F32), n.Binary("mul", a, b))),)
    loop = n.For("k", I32, _c(0), _v("m"), _c(1), body)
    choice = choose_order(loop, "tx", thread_lets={}, thread_variant={"acc"})
    assert choice is not None and len(choice.strided_loop) == len(choice.strided_threads) == 1
    assert choice.threads_inner
