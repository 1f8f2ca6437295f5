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
