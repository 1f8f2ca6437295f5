"""Block windows (``autodiff.windows``, ``polypy.poly.windows``): the adjoints of a read-only
input that several threads read are summed per block in shared memory, then flushed to the
global shadow -- plain adds where isl proves no other block reads the element, atomics for the
rest. Every check runs the gradient in the emulator with its race detector on, so a plain
flush that another block also touched would fail as a data race, not pass silently."""
from __future__ import annotations

import numpy as np
import pytest

from autodiff import Accumulation
from polypy.driver.pipelines import before_ad_pipeline
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.visitor import walk
from polypy.passes import run_pipeline
from polypy.poly.windows import WINDOW_LIMIT, block_window
from test_grad_semantics import GID, STENCIL, check, grad, module_of

CONV = """kernel conv(w: i32, h: i32, img: const f64*, k: const f64*, out: f64*) {
  var x: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  var y: i32 = (i32)(blockIdx.y * blockDim.y + threadIdx.y)
  if (x >= 1 && x < w - 1 && y >= 1 && y < h - 1) {
    var s: f64 = 0.0
    for dy: i32 = -1 to 2 step 1 {
      for dx: i32 = -1 to 2 step 1 {
        s = s + k[(dy + 1) * 3 + dx + 1] * img[(y + dy) * w + x + dx]
      }
    }
    out[y * w + x] = s * s
  }
}
"""

GATHER = f"""kernel gather(n: i32, idx: const i32*, x: const f64*, y: f64*) {{
  if ({GID} < n) {{
    y[{GID}] = x[idx[{GID}]] * x[idx[{GID}]]
  }}
}}
"""


def window_of(text: str, buffer: str):
    kernel = run_pipeline(module_of(text).kernels[0], before_ad_pipeline(optimize=True))
    return block_window(kernel, buffer)


def strategies(report, buffer: str) -> set[str]:
    return {d.strategy for d in report if isinstance(d, Accumulation) and d.buffer == buffer}


def atomics_into(g: n.Kernel, buffer: str) -> int:
    return sum(1 for s in walk(g) if isinstance(s, n.AtomicRMW) and s.buffer == buffer)


def plain_stores_into(g: n.Kernel, buffer: str) -> int:
    return sum(1 for s in walk(g) if isinstance(s, n.Store) and s.buffer == buffer)


def test_stencil_window_is_the_block_plus_its_halo() -> None:
    w = window_of(STENCIL, "x")
    assert not isinstance(w, str), w
    (dim,) = w.dims
    assert format_expr(dim.base) == "(i64)blockIdx.x * (i64)blockDim.x - 1l"
    assert format_expr(dim.extent) == "(i64)blockDim.x + 2l"
    assert format_expr(dim.step) == "(i64)blockDim.x" and dim.grid_dim == 0
    assert w.exclusive and w.repeats and w.max_slots == 1024 + 2


@pytest.mark.parametrize("grid,block,size", [(4, 32, 128), (3, 64, 150), (9, 16, 140), (1, 128, 100)])
def test_stencil_gradient_through_a_window(grid, block, size) -> None:
    _, g, report = grad(STENCIL)
    assert strategies(report, "x") == {"window"}
    reasons = {d.reason for d in report if isinstance(d, Accumulation) and d.buffer == "x"}
    assert all("plain adds for the elements isl proves no other block reads" in r for r in reasons)
    windows = [b for b in g.buffers if b.space == "shared" and b.name.startswith("win_x")]
    assert len(windows) == 1
    # The four reads' contributions go to shared memory; the global shadow sees one flush per
    # element: a plain add (interior) or an atomic (halo).
    assert atomics_into(g, windows[0].name) == 4
    assert atomics_into(g, "d_x") == 1 and plain_stores_into(g, "d_x") == 1
    rng = np.random.default_rng(grid * block)
    args = {"n": size - 3, "x": rng.standard_normal(size), "out": np.zeros(size)}
    check(STENCIL, grid, block, args)


def test_two_dimensional_window_by_delinearization_and_a_fixed_filter_window() -> None:
    img = window_of(CONV, "img")
    assert not isinstance(img, str), img
    assert [format_expr(d.extent) for d in img.dims] == ["(i64)blockDim.y + 2l", "(i64)blockDim.x + 2l"]
    assert [d.grid_dim for d in img.dims] == [1, 0] and img.exclusive
    k = window_of(CONV, "k")
    assert not isinstance(k, str), k
    assert k.max_slots == 9 and not k.exclusive and k.repeats  # every thread reads the whole filter
    _, g, report = grad(CONV)
    assert strategies(report, "img") == {"window"} and strategies(report, "k") == {"window"}
    rng = np.random.default_rng(5)
    for grid, block, (w, h) in [((3, 4), (8, 4), (22, 15)), ((2, 2), (16, 16), (30, 29)), ((5, 1), (4, 8), (18, 7))]:
        args = {"w": w, "h": h, "img": rng.standard_normal(w * h), "k": rng.standard_normal(9),
                "out": np.zeros(w * h)}
        check(CONV, grid, block, args)


def test_window_too_large_for_the_static_allocation_falls_back_to_atomics_at_run_time() -> None:
    img = window_of(CONV, "img")
    assert img.max_slots > WINDOW_LIMIT  # (1024 + 2) * 3 slots for blocks of 1024 x 1
    _, g, _ = grad(CONV)
    def atomic_in(body, prefix: str) -> bool:
        return any(isinstance(x, n.AtomicRMW) and x.buffer.startswith(prefix) for s in body for x in walk(s))

    guarded = [s for s in walk(g) if isinstance(s, n.If) and atomic_in(s.orelse, "d_img")
               and atomic_in(s.then, "win_img")]
    assert guarded, "each contribution chooses between the window and a direct atomic"
    rng = np.random.default_rng(6)
    w, h = 1030, 4
    args = {"w": w, "h": h, "img": rng.standard_normal(w * h), "k": rng.standard_normal(9), "out": np.zeros(w * h)}
    check(CONV, (2, 2), (1024, 1), args)  # 1026 * 3 slots: the atomics
    check(CONV, (9, 1), (128, 4), args)  # 130 * 6 slots: the window


def test_windows_change_only_the_association_of_the_sums() -> None:
    rng = np.random.default_rng(7)
    args = {"n": 200, "x": rng.standard_normal(204), "out": np.zeros(204)}
    with_windows = check(STENCIL, 7, 32, dict(args))
    without = check(STENCIL, 7, 32, dict(args), windows=False)
    assert not any(b.name.startswith("win_") for b in without.buffers)
    assert any(b.name.startswith("win_") for b in with_windows.buffers)


def test_no_window_for_data_dependent_indices_or_written_buffers() -> None:
    reason = window_of(GATHER, "x")
    assert isinstance(reason, str) and "isl cannot express" in reason
    _, g, report = grad(GATHER)
    assert strategies(report, "x") == {"atomic"}
    assert not any(b.name.startswith("win_") for b in g.buffers)
    assert "writes out" in window_of(CONV, "out")
    rng = np.random.default_rng(8)
    args = {"n": 60, "idx": rng.integers(0, 10, 64).astype(np.int32), "x": rng.standard_normal(10),
            "y": np.zeros(64)}
    check(GATHER, 2, 32, args)


def test_no_window_where_it_would_save_nothing() -> None:
    # Each element read once per block, by threads of several blocks: a window saves no atomic.
    text = f"""kernel wrap(n: i32, x: const f64*, y: f64*) {{
  if ({GID} < n) {{
    y[{GID}] = x[{GID} % 16] * 2.0
  }}
}}
"""
    _, _, report = grad(text)
    assert "window" not in strategies(report, "x")
    rng = np.random.default_rng(9)
    check(text, 3, 32, {"n": 90, "x": rng.standard_normal(16), "y": np.zeros(96)})


def test_no_window_past_the_static_shared_memory_budget() -> None:
    # 40 KB of the kernel's own shared memory leave no room for an 8 KB window (1026 f64
    # slots) within CUDA's 48 KiB of static shared memory (less the reserve for reductions).
    text = f"""kernel staged(n: i32, x: const f64*, out: f64*) {{
  shared buf: f64[5000]
  if ({GID} >= 1 && {GID} < n - 1) {{
    buf[(i32)threadIdx.x] = x[{GID} - 1] * x[{GID} + 1]
    out[{GID}] = buf[(i32)threadIdx.x] * x[{GID}]
  }}
}}
"""
    _, g, report = grad(text)
    assert strategies(report, "x") == {"atomic"}
    reasons = {d.reason for d in report if isinstance(d, Accumulation) and d.buffer == "x"}
    assert any("48 KiB" in r for r in reasons)
    assert not any(b.name.startswith("win_") for b in g.buffers)
    rng = np.random.default_rng(10)
    check(text, 3, 32, {"n": 90, "x": rng.standard_normal(96), "out": np.zeros(96)})
    # Without the big array the same reads get a window.
    _, _, report2 = grad(text.replace("f64[5000]", "f64[256]"))
    assert strategies(report2, "x") == {"window"}


# ----------------------------------------------------------------------------- windows per chunk of a loop
# PolyBench's gemm written anew: row strides fixed (24), bounds from the arguments. What a block
# reads of a and b grows with nk, so there is no whole-kernel window; 16 iterations of the k loop
# read a bounded window (issue 12, item 3). The accumulator declared before the loop and read
# after it is hoisted when the guard moves into the loop.
GEMM = """kernel gemm(ni: i32, nj: i32, nk: i32, a: const f64*, b: const f64*, c: f64*) {
  var j: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  var i: i32 = (i32)(blockIdx.y * blockDim.y + threadIdx.y)
  if (i < ni && j < nj) {
    var acc: f64 = 0.0
    for k: i32 = 0 to nk step 1 {
      acc = acc + a[i * 24 + k] * b[k * 24 + j]
    }
    c[i * 24 + j] = acc * acc
  }
}
"""


def gemm_args(ni: int, nj: int, nk: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    size = 24 * (max(ni, nk) + 2) + nk
    return {"ni": ni, "nj": nj, "nk": nk, "a": rng.standard_normal(size), "b": rng.standard_normal(size),
            "c": np.zeros(size)}


def test_a_chunk_of_the_serial_loop_has_a_window_where_the_whole_kernel_has_none() -> None:
    from polypy.poly.paths import iter_statements
    from polypy.poly.windows import Chunk, chunk_window

    kernel = run_pipeline(module_of(GEMM).kernels[0], before_ad_pipeline(optimize=True))
    assert "not bounded" in block_window(kernel, "a")
    loop = next(path for path, s in iter_statements(kernel.body) if isinstance(s, n.For))
    a = chunk_window(kernel, "a", Chunk(loop, 16, "first"))
    b = chunk_window(kernel, "b", Chunk(loop, 16, "first"))
    assert not isinstance(a, str) and not isinstance(b, str), (a, b)
    # a: the block's rows by 16 columns from `first`; b: 16 rows from `first` by the block's
    # columns (row-major indices with a constant row length, split in two coordinates)
    assert [format_expr(d.base) for d in a.dims] == ["(i64)blockIdx.y * (i64)blockDim.y", "first"]
    assert [format_expr(d.extent) for d in a.dims] == ["(i64)blockDim.y", "16l"]
    assert [format_expr(d.base) for d in b.dims] == ["first", "(i64)blockIdx.x * (i64)blockDim.x"]
    assert [format_expr(d.extent) for d in b.dims] == ["16l", "(i64)blockDim.x"]
    assert format_expr(a.factor) == format_expr(b.factor) == "24"
    assert a.repeats and b.repeats and not a.exclusive and not b.exclusive
    # a read outside the loop is not covered by the chunk's window
    outside = GEMM.replace("c[i * 24 + j] = acc * acc", "c[i * 24 + j] = acc * acc * a[i]")
    kernel2 = run_pipeline(module_of(outside).kernels[0], before_ad_pipeline(optimize=True))
    loop2 = next(path for path, s in iter_statements(kernel2.body) if isinstance(s, n.For))
    assert "outside the loop" in chunk_window(kernel2, "a", Chunk(loop2, 16, "first"))
    # every thread reads its own elements of a chunk (matmul_tiled's staged tiles): no window
    own = GEMM.replace("a[i * 24 + k]", "a[i * 24 + k + j]")
    kernel3 = run_pipeline(module_of(own).kernels[0], before_ad_pipeline(optimize=True))
    loop3 = next(path for path, s in iter_statements(kernel3.body) if isinstance(s, n.For))
    assert "every thread index" in chunk_window(kernel3, "a", Chunk(loop3, 16, "first"))


@pytest.mark.parametrize("grid,block,sizes", [
    ((3, 2), (8, 8), (13, 20, 24)),   # one full chunk, one partial one
    ((2, 3), (16, 4), (11, 20, 5)),   # one partial chunk
    ((1, 2), (32, 8), (16, 24, 40)),  # three chunks, reads past a row (the storage allows it)
])
def test_gemm_gradient_sums_a_chunk_of_iterations_in_shared_memory(grid, block, sizes) -> None:
    _, g, report = grad(GEMM)
    assert strategies(report, "a") == {"window"} and strategies(report, "b") == {"window"}
    reasons = {d.reason for d in report if isinstance(d, Accumulation) and d.buffer in ("a", "b")}
    assert all("16 iterations at a time" in r for r in reasons), reasons
    # Into d_a and d_b: the flush, and the fallback for windows past the allocation (blocks of 128+ rows).
    assert atomics_into(g, "d_b") == 2 and atomics_into(g, "d_a") == 2
    chunk_loops = [s for s in walk(g) if isinstance(s, n.For) and isinstance(s.step, n.Const) and s.step.value == 16]
    assert len(chunk_loops) == 1 and sum(isinstance(x, n.Barrier) for x in chunk_loops[0].body) >= 2
    check(GEMM, grid, block, gemm_args(*sizes, seed=sum(sizes)))


def test_chunk_window_too_large_for_the_allocation_falls_back_to_atomics() -> None:
    # blockDim.y = 256: the window of a is 256 rows by 16 columns (4096 slots > WINDOW_LIMIT)
    assert WINDOW_LIMIT < 256 * 16
    check(GEMM, (1, 1), (1, 256), gemm_args(200, 1, 20, seed=3))


def test_gemm_gradient_with_and_without_chunk_windows_matches_finite_differences() -> None:
    args = gemm_args(9, 13, 21, seed=4)
    with_windows = check(GEMM, (2, 3), (8, 4), dict(args))
    without = check(GEMM, (2, 3), (8, 4), dict(args), windows=False)
    assert any(b.name.startswith("win_") for b in with_windows.buffers)
    assert not any(b.name.startswith("win_") for b in without.buffers)


def test_guards_move_into_the_loop_only_when_nothing_changes_their_condition() -> None:
    from autodiff.chunks import sink_guards
    from polypy.poly.paths import iter_statements

    def sunk(text: str):
        kernel = run_pipeline(module_of(text).kernels[0], before_ad_pipeline(optimize=False))
        loop = next(path for path, s in iter_statements(kernel.body) if isinstance(s, n.For))
        return sink_guards(kernel, loop)

    got = sunk(GEMM)
    assert got is not None
    kernel, loop = got
    assert len(loop) == 1 and isinstance(kernel.body[loop[0][1]].body[0], n.If)
    decls = [s for s in kernel.body if isinstance(s, n.Decl)]
    assert any(d.name == "acc" and d.init is None for d in decls)  # hoisted, assigned under the guard
    changing = GEMM.replace("acc = acc + a", "if (acc > 1000.0) {\n        i = 0\n      }\n      acc = acc + a")
    assert sunk(changing) is None
    loaded = GEMM.replace("if (i < ni && j < nj)", "if (i < ni && c[0] < 1.0)")
    assert sunk(loaded) is None


# The loop in the else branch of the guard: the condition moves into the loop negated.
NEGATED = GEMM.replace("""  if (i < ni && j < nj) {
    var acc: f64 = 0.0""", """  if (i >= ni || j >= nj) {
    c[i * 24 + j] = 0.0
  } else {
    var acc: f64 = 0.0""")


def test_a_loop_in_the_else_branch_gets_the_negated_guard():
    assert NEGATED != GEMM
    _, g, report = grad(NEGATED)
    assert strategies(report, "a") == {"window"} and strategies(report, "b") == {"window"}
    # the launch covers exactly nj columns, so the rows past ni write elements of their own
    check(NEGATED, (2, 4), (8, 4), gemm_args(13, 16, 20, seed=5))
