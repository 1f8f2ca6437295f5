"""Adjoint writes that need no atomics (issue 12): privacy proved under parameters.

* strided loops (``for c = tid; c < cols; c += blockDim.x``): the loop variable is a dimension of
  the model and the pairwise fact "``c - tid`` is a multiple of ``blockDim.x``" proves each
  element of a row private to one thread (``polypy.poly.instances.Stride``); a row offset
  ``blockIdx.x * cols`` keeps blocks apart (``Model.block_factors``);
* versioning: ``x[i * LD + j]`` with ``j < cols`` is private exactly when ``cols <= LD``; isl
  computes that condition, the gradient tests it once per launch and uses plain ``+=`` when it
  holds, atomics otherwise -- both versions are checked against finite differences;
* a failure of the polyhedral model inside ``grad`` is an internal error, never a silent "not
  proved, use atomics".

Every check runs in the emulator (float64, central differences along random directions).
"""
from __future__ import annotations

import numpy as np
import pytest

from autodiff import Accumulation
from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.visitor import walk
from test_grad_semantics import check, grad

ROWS = """kernel rows(cols: i32, x: const f64*, y: f64*) {
  var base: i32 = (i32)blockIdx.x * cols
  for c: i32 = (i32)threadIdx.x to cols step (i32)blockDim.x {
    y[base + c] = x[base + c] * x[base + c]
  }
  for c2: i32 = (i32)threadIdx.x to cols step (i32)blockDim.x {
    y[base + c2] = y[base + c2] + 3.0 * x[base + c2]
  }
}
"""

# x is read with a fixed row stride LD = 16 while the columns run to the argument cols: rows
# overlap when cols > 16, so the elements are private to a thread exactly when cols <= 16.
PITCHED = """kernel pitched(rows: i32, cols: i32, x: const f64*, out: f64*) {
  var j: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  var i: i32 = (i32)(blockIdx.y * blockDim.y + threadIdx.y)
  if (i < rows && j < cols) {
    out[i * cols + j] = x[i * 16 + j] * x[i * 16 + j] + x[i * 16 + j]
  }
}
"""


def decisions(report, buffer: str) -> list[Accumulation]:
    return [d for d in report if isinstance(d, Accumulation) and d.buffer == buffer]


def atomics_into(g: n.Kernel, buffer: str) -> int:
    return sum(1 for s in walk(g) if isinstance(s, n.AtomicRMW) and s.buffer == buffer)


def test_strided_loop_elements_are_private_and_need_no_atomic() -> None:
    _, g, report = grad(ROWS)
    got = decisions(report, "x")
    assert got and all(d.strategy == "plain" for d in got), [d.format() for d in got]
    assert atomics_into(g, "d_x") == 0 and atomics_into(g, "d_y") == 0
    # without the proof the same adjoints are atomics (what the old model gave)
    _, g_atomic, report_atomic = grad(ROWS, privacy=False)
    assert {d.strategy for d in decisions(report_atomic, "x")} == {"atomic"}
    assert atomics_into(g_atomic, "d_x") > 0


@pytest.mark.parametrize("block", [8, 32, 64])
def test_strided_loop_gradient_matches_finite_differences(block: int) -> None:
    rng = np.random.default_rng(block)
    rows, cols = 3, 37
    args = {"cols": cols, "x": rng.standard_normal(rows * cols), "y": np.zeros(rows * cols)}
    check(ROWS, rows, block, args)


def test_versioned_adjoint_names_its_condition() -> None:
    _, g, report = grad(PITCHED)
    got = decisions(report, "x")
    assert got and {d.strategy for d in got} == {"versioned"}, [d.format() for d in got]
    assert "cols <= 16" in got[0].reason
    flags = [s for s in g.body if isinstance(s, n.Decl) and s.name.startswith("x_private")]
    assert len(flags) == 1 and format_expr(flags[0].init) == "(i64)cols <= 16l"
    # both versions are there, chosen by the flag: a plain store into d_x, and otherwise the
    # block window of x (atomics into shared memory, or into d_x when the window is too small)
    versioned = [s for s in walk(g) if isinstance(s, n.If) and isinstance(s.cond, n.Var)
                 and s.cond.name == flags[0].name]
    assert versioned
    for s in versioned:
        assert isinstance(s.then[0], n.Store) and s.then[0].buffer == "d_x"
        other = {x.buffer for y in s.orelse for x in walk(y) if isinstance(x, n.AtomicRMW)}
        assert other and other <= {"d_x"} | {x.name for x in g.buffers if x.name.startswith("win_x")}
    assert {d.strategy for d in decisions(report, "out")} <= {"plain"}


@pytest.mark.parametrize("cols", [16, 12, 23])  # private (cols <= 16) and overlapping rows (23)
def test_versioned_gradient_matches_finite_differences_in_both_versions(cols: int) -> None:
    rng = np.random.default_rng(cols)
    rows = 5
    args = {"rows": rows, "cols": cols, "x": rng.standard_normal(rows * 16 + cols),
            "out": np.zeros(rows * cols)}
    check(PITCHED, ((cols + 7) // 8, (rows + 1) // 2), (8, 2), args)


def test_model_failure_in_grad_is_an_internal_error(monkeypatch) -> None:
    import polypy.poly

    def broken(*args, **kwargs):
        raise TypeError("isl.Val cannot hold 18446744073709551615")

    monkeypatch.setattr(polypy.poly, "sharing", broken)
    with pytest.raises(InternalError, match="privacy proof of 'x'.*TypeError"):
        grad(ROWS)


SIZE_T = """#include <stddef.h>
__global__ void rows_sz(const double* x, double* y, size_t cols)
{
    for (size_t c = threadIdx.x; c < cols; c += blockDim.x)
        y[blockIdx.x * cols + c] = 2.0 * x[blockIdx.x * cols + c] * x[blockIdx.x * cols + c];
}

__global__ void grid_stride(const double* x, double* y, size_t n)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
        y[i] = x[i] * x[i] - x[i];
}
"""


def cuda_grad(tmp_path, kernel: str):
    import polypy
    from polypy.driver.gradients import grad_kernel

    src = tmp_path / "size_t.cu"
    src.write_text(SIZE_T)
    module = polypy.load(str(src))
    report: list = []
    return module.kernel(kernel), grad_kernel(module, kernel, report=report), report


def check_cuda(k, g, grid, block, args) -> None:
    from autodiff.check import check_gradients

    result = check_gradients(k, g, grid, block, args)
    assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result


def test_size_t_loop_gradient_has_no_model_failure(tmp_path) -> None:
    # u64 constants (2**64 - 1, the modulus 2**64) reached isl.Val as C longs: a TypeError that
    # grad used to swallow ("model failed"), falling back to atomics without a word
    k, g, report = cuda_grad(tmp_path, "rows_sz")
    assert decisions(report, "x") and not any("model failed" in d.reason for d in decisions(report, "x"))
    rng = np.random.default_rng(3)
    rows, cols = 3, 21
    args = {"x": rng.standard_normal(rows * cols), "y": np.zeros(rows * cols), "cols": np.uint64(cols)}
    check_cuda(k, g, rows, 8, args)


def test_grid_stride_loop_elements_are_private(tmp_path) -> None:
    # i = gid + k * (blockDim.x * gridDim.x) with 0 <= gid < blockDim.x * gridDim.x
    k, g, report = cuda_grad(tmp_path, "grid_stride")
    assert {d.strategy for d in decisions(report, "x")} == {"plain"}, [d.format() for d in report]
    assert atomics_into(g, "d_x") == 0
    rng = np.random.default_rng(4)
    n_ = 83  # 3 blocks of 8 threads: each thread visits 3 or 4 elements
    check_cuda(k, g, 3, 8, {"x": rng.standard_normal(n_), "y": np.zeros(n_), "n": np.uint64(n_)})


# A hotspot-like kernel (issue 12: its gradient spent minutes searching for a run-time privacy
# condition): a tile with a halo in shared memory, relaxed a run-time number of times, each
# point reading its four clamped neighbours, the inner points written back (linear in the loop,
# like hotspot, so that no tape is sized at launch: the emulator's check needs static extents).
RELAX = """#define T 8
__global__ void relax(int sweeps, const double* src, double* dst, int w, int h)
{
    __shared__ double cur[T][T];
    __shared__ double nxt[T][T];
    int tx = threadIdx.x, ty = threadIdx.y;
    int gx = blockIdx.x * (T - 2) + tx - 1;
    int gy = blockIdx.y * (T - 2) + ty - 1;
    bool inside = gx >= 0 && gx < w && gy >= 0 && gy < h;
    if (inside)
        cur[ty][tx] = src[gy * w + gx] * src[gy * w + gx];
    else
        cur[ty][tx] = 0.0;
    __syncthreads();
    int west = tx > 0 ? tx - 1 : 0, east = tx < T - 1 ? tx + 1 : T - 1;
    int north = ty > 0 ? ty - 1 : 0, south = ty < T - 1 ? ty + 1 : T - 1;
    bool core = tx >= 1 && tx <= T - 2 && ty >= 1 && ty <= T - 2;
    for (int s = 0; s < sweeps; s++) {
        if (core)
            nxt[ty][tx] = 0.5 * cur[ty][tx]
                + 0.125 * (cur[ty][west] + cur[ty][east] + cur[north][tx] + cur[south][tx]);
        __syncthreads();
        if (core)
            cur[ty][tx] = nxt[ty][tx];
        __syncthreads();
    }
    if (inside && core)
        dst[gy * w + gx] = cur[ty][tx];
}
"""


def relax_grad(tmp_path, monkeypatch):
    import importlib

    import polypy
    import polypy.poly
    from polypy.driver.gradients import grad_kernel

    module_of_sharing = importlib.import_module("polypy.poly.sharing")
    answers = []

    def recorded(*args, **kwargs):
        s = module_of_sharing.sharing(*args, **kwargs)
        answers.append(s)
        return s

    monkeypatch.setattr(polypy.poly, "sharing", recorded)
    src = tmp_path / "relax.cu"
    src.write_text(RELAX)
    module = polypy.load(str(src))
    report: list = []
    g = grad_kernel(module, "relax", report=report)
    return module.kernel("relax"), g, report, answers, module_of_sharing


def test_hotspot_like_condition_search_is_bounded(tmp_path, monkeypatch) -> None:
    k, g, report, answers, sharing_module = relax_grad(tmp_path, monkeypatch)
    assert {s.buffer for s in answers} >= {"cur", "src"}
    for s in answers:  # a bounded number of isl operations per buffer: past the budget it stops
        assert s.condition_steps <= sharing_module.MAX_CONDITION_STEPS or s.condition_gave_up, s
        assert s.private_when is None or not s.condition_gave_up
    cur = [s for s in answers if s.buffer == "cur"]
    # 4 reads of neighbours + reads/writes of the centre: too many pairs to search at all
    assert cur and cur[0].condition_gave_up.startswith("no search") and cur[0].condition_steps == 0
    # the give-up is said in --report, and the adjoint takes the shared (atomic) path
    got = decisions(report, "cur")
    assert got and all(d.strategy == "atomic" and "run-time condition" in d.reason for d in got)


@pytest.mark.parametrize("sweeps", [0, 2])
def test_hotspot_like_gradient_matches_finite_differences(tmp_path, monkeypatch, sweeps: int) -> None:
    k, g, _, _, _ = relax_grad(tmp_path, monkeypatch)
    rng = np.random.default_rng(sweeps)
    w, h = 9, 7  # 2 x 2 blocks of 6 x 6 inner points (partial at the right and bottom)
    args = {"sweeps": sweeps, "src": rng.standard_normal(w * h), "dst": np.zeros(w * h), "w": w, "h": h}
    check_cuda(k, g, (2, 2), (8, 8), args)


def test_condition_search_within_budget_keeps_its_answer_and_past_it_gives_up(monkeypatch) -> None:
    import importlib

    from polypy.passes import SIMPLIFY, run_pipeline
    from polypy.ir import parse_kernel

    sharing_module = importlib.import_module("polypy.poly.sharing")
    k = run_pipeline(parse_kernel(PITCHED), SIMPLIFY)
    s = sharing_module.sharing(k, "x")
    assert format_expr(s.private_when) == "(i64)cols <= 16l" and not s.condition_gave_up
    assert 0 < s.condition_steps <= sharing_module.MAX_CONDITION_STEPS
    monkeypatch.setattr(sharing_module, "MAX_CONDITION_STEPS", s.condition_steps // 2)
    small = sharing_module.sharing(k, "x")
    assert small.private_when is None and "gave up after" in small.condition_gave_up
    assert small.condition_steps <= s.condition_steps // 2 + 64  # stops at the first step past it
    # x's three loads are one access (same statement, same index): one pair, over 8 pieces
    monkeypatch.setattr(sharing_module, "MAX_CONDITION_QUESTIONS", 4)
    assert sharing_module.sharing(k, "x").condition_gave_up.startswith(
        "no search for a run-time condition: 1 access pairs x 8 thread pieces")


STAGED = """__global__ void staged(const double* x, double* y)
{
    __shared__ double t[64];
    t[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    y[blockIdx.x * blockDim.x + threadIdx.x] = t[threadIdx.x] * t[threadIdx.x];
}
"""


def test_shared_array_element_of_one_thread_is_private(tmp_path) -> None:
    # every block has its own copy of a shared array: blocks never share its elements (the
    # model compared the indices of two blocks' accesses and found t[3] "shared" by them)
    import polypy
    from polypy.driver.gradients import grad_kernel
    from polypy.poly import sharing

    src = tmp_path / "staged.cu"
    src.write_text(STAGED)
    module = polypy.load(str(src))
    k = module.kernel("staged")
    s = sharing(k, "t")
    assert s.thread_private and s.block_private and s.accumulation == "plain"
    report: list = []
    g = grad_kernel(module, "staged", report=report)
    assert {d.strategy for d in decisions(report, "t")} <= {"plain"}
    assert not any(isinstance(x, n.AtomicRMW) and x.buffer.startswith("d_t") for x in walk(g))
    rng = np.random.default_rng(5)
    check_cuda(k, g, 3, 64, {"x": rng.standard_normal(3 * 64), "y": np.zeros(3 * 64)})


# x is read row-major with the row length w an argument and the column from the thread: a 2-D
# index (row, column) only while the block is at most w wide. Wider blocks read into the next
# row, and two threads then read one element.
WIDE = """kernel wide(w: i32, x: const f64*, y: f64*) {
  y[(i32)(blockIdx.x * blockDim.x + threadIdx.x)] = x[(i32)blockIdx.x * w + (i32)threadIdx.x] * x[(i32)blockIdx.x * w + (i32)threadIdx.x]
}
"""


def test_a_row_major_index_valid_for_narrow_blocks_is_versioned_on_the_block_width() -> None:
    _, g, report = grad(WIDE)
    got = decisions(report, "x")
    assert got and {d.strategy for d in got} == {"versioned"}, [d.format() for d in got]
    assert "(i64)blockDim.x - (i64)w <= 0l" in got[0].reason, got[0].reason


@pytest.mark.parametrize("block", [8, 12, 16])  # narrow (private) and wider than w = 12
def test_a_gradient_versioned_on_the_block_width_matches_finite_differences(block: int) -> None:
    rng = np.random.default_rng(block)
    w, blocks = 12, 4
    args = {"w": w, "x": rng.standard_normal(blocks * w + block), "y": np.zeros(blocks * block)}
    check(WIDE, blocks, block, args)


# C = A B with every operand a plain pointer (PolyBench's gemm, written anew).
GEMM = r"""
__global__ void gemm(int ni, int nj, int nk, const float* a, const float* b, float* c)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < ni && j < nj) {
        float acc = 0.0f;
        for (int k = 0; k < nk; k++)
            acc += a[i * nk + k] * b[k * nj + j];
        c[i * nj + j] = acc;
    }
}
"""


def test_a_gradients_shadows_never_share_storage_with_its_arguments() -> None:
    """The calling convention: shadows are storage of their own (``Kernel.disjoint``). So the
    loop over the threads may sum d_a's adds although it reads a after them, and a launch that
    passes a shadow overlapping an argument is refused."""
    import polypy
    from polypy.poly.alias import alias_kind

    mod = polypy.compile(None, text=GEMM)
    g = polypy.grad(mod.gemm, wrt=["a", "b"])
    kernel = g.gpu
    assert alias_kind(kernel, "a", "d_a") is None and alias_kind(kernel, "b", "d_a") is None
    assert alias_kind(kernel, "d_a", "d_b") == "any"  # shadows alias as their primals may
    assert alias_kind(kernel, "a", "b") == "any"  # two plain pointers of the kernel itself
    assert any(name.startswith("d_a_sum") for name in g.compiled.cpu.order_free_sums)
    n_ = 48
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n_ * n_).astype(np.float32), rng.standard_normal(n_ * n_).astype(np.float32)
    seed = rng.standard_normal(n_ * n_).astype(np.float32)
    d_a, d_b = np.zeros_like(a), np.zeros_like(b)
    config = ((3, 6), (16, 8))
    g[config](n_, n_, n_, a, d_a, b, d_b, np.zeros_like(seed), seed.copy())
    A, B, S = (m.reshape(n_, n_).astype(np.float64) for m in (a, b, seed))
    np.testing.assert_allclose(d_a.reshape(n_, n_), S @ B.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(d_b.reshape(n_, n_), A.T @ S, rtol=1e-4, atol=1e-4)
    with pytest.raises(polypy.UserError, match="shadow must be storage of its own"):
        g[config](n_, n_, n_, a, a, b, d_b, np.zeros_like(seed), seed.copy())


def test_polybench_gemms_output_adjoint_is_versioned_on_its_column_bound() -> None:
    """c[i * NJ + j] with j < nj: private exactly when nj <= NJ (issue 12, item 2). Ten access
    pairs of c over eight thread and block pieces: within the search's budget."""
    from polypy.driver.gradients import grad_kernel
    from polypy.driver.source import load
    from samples.spec import sample

    s = sample("gemm")
    report: list = []
    grad_kernel(load(s.source, defines=dict(s.defines)), "gemm", wrt=list(s.wrt), report=report)
    got = decisions(report, "c")
    assert got and {d.strategy for d in got} == {"versioned"}, [d.format() for d in got]
    assert "(i64)nj <= 64l" in got[0].reason


# cfd's compute_step_factor (issue 38 item 4): components of one element stored nelr apart
STEP_FACTOR = """kernel step(nelr: i32, v: const f64*, out: f64*) {
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  out[i] = v[i] * v[i + nelr] + v[i + 2 * nelr]
}
"""


def test_no_versioning_condition_that_never_holds_at_a_real_size() -> None:
    # It used to be versioned on ``-nelr <= -2147483647`` (the model's bound on a thread index,
    # not a property of the kernel): a test that is false at every real size, so the kernel
    # always ran the atomic version. The condition now holds for real (one-block) launches.
    _, g, report = grad(STEP_FACTOR)
    got = decisions(report, "v")
    assert got and {d.strategy for d in got} == {"versioned"}, [d.format() for d in got]
    for d in got:
        assert "2147483647" not in d.reason and "nelr" in d.reason, d.reason
    flags = [s for s in g.body if isinstance(s, n.Decl) and s.name.startswith("v_private")]
    assert len(flags) == 1
    assert format_expr(flags[0].init) == "(i64)blockDim.x - (i64)nelr <= 0l && (i64)gridDim.x <= 1l"


@pytest.mark.parametrize("grid,block,nelr", [(1, 32, 32), (1, 16, 40), (3, 32, 96), (4, 8, 20)])
def test_step_factor_gradient_matches_finite_differences(grid: int, block: int, nelr: int) -> None:
    # the plain version (one block), and the shared one (several blocks; nelr < threads: the
    # components of neighbouring elements overlap)
    rng = np.random.default_rng(nelr)
    threads = grid * block
    args = {"nelr": nelr, "v": rng.standard_normal(threads + 2 * nelr), "out": np.zeros(threads)}
    check(STEP_FACTOR, (grid,), (block,), args)


# Rodinia's nn (issue 38): one thread per record over a 2-D grid numbered row-major,
# blockDim.x * (gridDim.x * blockIdx.y + blockIdx.x) + threadIdx.x. The adjoints of loc were
# atomic (versioned on a one-block grid) because that product is not affine; the blocks' row-major
# index tells blocks apart (polypy.poly.index_shapes.linear_block_stride), so they are plain.
NN_ID = "(i32)(blockDim.x * (gridDim.x * blockIdx.y + blockIdx.x) + threadIdx.x)"
NN = f"""kernel euclid(loc: const f64*, dist: f64*, n: i32, lat: f64, lng: f64) {{
  var gid: i32 = {NN_ID}
  if (gid < n) {{
    dist[gid] = sqrt((lat - loc[gid * 2]) * (lat - loc[gid * 2]) + (lng - loc[gid * 2 + 1]) * (lng - loc[gid * 2 + 1]))
  }}
}}
"""


def test_a_row_major_numbered_grid_makes_each_records_adjoint_plain() -> None:
    _, g, report = grad(NN)
    got = decisions(report, "loc")
    assert got and {d.strategy for d in got} == {"plain"}, [d.format() for d in got]
    assert atomics_into(g, "d_loc") == 0


@pytest.mark.parametrize("grid,block,n", [((3, 2, 1), (8, 1, 1), 48), ((2, 3, 1), (16, 1, 1), 85),
                                          ((1, 1, 1), (32, 1, 1), 20), ((4, 1, 1), (8, 1, 1), 30)])
def test_a_row_major_numbered_grid_gradient_matches_finite_differences_and_atomics(grid, block, n) -> None:
    from polypy.emulator import emulate
    rng = np.random.default_rng(n)
    args = {"loc": rng.standard_normal(2 * n), "dist": np.zeros(n), "n": n, "lat": 0.3, "lng": -0.7}
    g = check(NN, grid, block, args)
    _, g_atomic, _ = grad(NN, privacy=False)
    assert atomics_into(g_atomic, "d_loc") > 0
    # one contribution per element: the plain and the atomic adds give the same bits
    results = []
    for kernel in (g, g_atomic):
        a = {p.name: np.zeros(1) for p in kernel.params if p.name in ("d_lat", "d_lng")}
        a.update({"loc": args["loc"].copy(), "dist": np.zeros(n), "n": n, "lat": 0.3, "lng": -0.7,
                  "d_loc": np.zeros(2 * n), "d_dist": np.arange(n, dtype=np.float64) - 3.0})
        emulate(kernel, grid, block, a)
        results.append(a)
    for name in ("d_loc", "d_dist"):
        assert np.array_equal(results[0][name], results[1][name]), name
