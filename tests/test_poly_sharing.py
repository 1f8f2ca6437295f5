"""Whether a buffer's elements are private to a thread, uniform in a block, or shared."""
from __future__ import annotations

import pytest

from polypy.ir import parse_kernel
from polypy.passes import SIMPLIFY, run_pipeline
from polypy.poly import AccessId, Launch, sharing

GID = "(i32)(blockIdx.x * blockDim.x + threadIdx.x)"


def prepare(text: str):
    return run_pipeline(parse_kernel(text), SIMPLIFY)


def test_saxpy_elements_are_private_to_a_thread() -> None:
    k = prepare(f"""kernel saxpy(n: i32, a: f32, x: const f32*, y: f32*) {{
  if ({GID} < n) {{
    y[{GID}] = a * x[{GID}] + y[{GID}]
  }}
}}
""")
    s = sharing(k, "y")
    assert s.thread_private and s.block_private and not s.block_uniform
    assert s.accumulation == "plain"


def test_stencil_neighbours_are_shared() -> None:
    k = prepare(f"""kernel stencil(n: i32, x: const f32*, y: f32*) {{
  if ({GID} >= 1 && {GID} < n - 1) {{
    y[{GID}] = x[{GID} - 1] + x[{GID} + 1]
  }}
}}
""")
    assert sharing(k, "x").accumulation == "atomic"
    assert not sharing(k, "x").block_private  # blocks share their edges
    assert sharing(k, "y").thread_private
    # One access alone: x[i - 1] is still private.
    assert sharing(k, "x", access=AccessId((("body", 0), ("then", 0)), 0)).thread_private
    with pytest.raises(KeyError):
        sharing(k, "x", access=AccessId((("body", 0),), 7))


def test_row_major_two_dimensional_index_is_private() -> None:
    k = prepare("""kernel scale2d(w: i32, h: i32, b: f32*) {
  var x: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  var y: i32 = (i32)(blockIdx.y * blockDim.y + threadIdx.y)
  if (x < w && y < h) {
    b[y * w + x] = b[y * w + x] * 2.0f
  }
}
""")
    assert sharing(k, "b").thread_private


def test_block_reduction_target() -> None:
    k = prepare(f"""kernel partial(n: i32, x: const f32*, out: f32*, total: f32*) {{
  if ({GID} < n) {{
    atomic.add out[(i32)blockIdx.x], x[{GID}]
    atomic.add total[0], x[{GID}]
  }}
}}
""")
    out = sharing(k, "out")
    assert out.block_uniform and out.block_private and out.accumulation == "block-reduction"
    total = sharing(k, "total")
    assert total.block_uniform and not total.block_private and not total.thread_private


def test_data_dependent_index_needs_atomics() -> None:
    k = prepare(f"""kernel hist(n: i32, x: const i32*, bins: i32*) {{
  if ({GID} < n) {{
    atomic.add bins[x[{GID}]], 1
  }}
}}
""")
    s = sharing(k, "bins")
    assert not s.thread_private and not s.block_uniform and s.accumulation == "atomic"


def test_grid_stride_loop_is_private_for_a_launch() -> None:
    k = prepare(f"""kernel k(n: i32, y: f32*) {{
  for j: i32 = {GID} to n step (i32)(blockDim.x * gridDim.x) {{
    y[j] = y[j] + 1.0f
  }}
}}
""")
    # Symbolically too: a grid-stride loop (polypy.poly.instances.Stride, 0 <= start < step).
    assert sharing(k, "y").thread_private
    assert sharing(k, "y", launch=Launch.of(4, 64, {})).thread_private


def test_threads_reading_one_shared_value() -> None:
    k = prepare("""kernel k(p: const f32*, y: f32*) {
  y[threadIdx.x] = p[0]
}
""")
    p = sharing(k, "p")
    assert not p.thread_private and p.block_uniform


def test_a_row_major_index_private_only_for_some_launches_gets_a_condition() -> None:
    # backprop's weights[(by * 16 + ty) * hid + bx * 16 + tx]: 2-D (row, column) only while the
    # column stays below hid -- for blocks at most 16 wide whose columns end before hid. Each
    # launch dimension is bounded from above; the condition is a conjunction, one term per way
    # two threads could meet (a wide block, a tall block, columns past hid).
    from polypy.driver.source import load
    from polypy.ir.printer import format_expr
    from polypy.poly.model import build_model
    from samples.spec import sample

    kernel = load(sample("backprop_layerforward").source).kernel("backprop_layerforward")
    (access,) = build_model(kernel).accesses_of("weights")
    (delin,) = access.delin
    assert delin is not None and delin.valid is not None and not access.index_exact
    s = sharing(kernel, "weights")
    assert not s.thread_private and s.private_when is not None
    text = format_expr(s.private_when)
    for term in ("(i64)blockDim.x <= 16l", "(i64)blockDim.y <= 16l",
                 "(i64)blockDim.x + 16l * (i64)gridDim.x - (i64)hid <= 16l"):
        assert term in text, text
    assert " || " not in text
    # one column of blocks (Rodinia's launch) reads each input element in one thread
    assert "(i64)gridDim.x <= 1l" in format_expr(sharing(kernel, "input").private_when)


def test_no_condition_that_holds_only_beyond_every_index() -> None:
    # cfd's compute_step_factor reads variables[i + v * nelr], v = 0..4 (issue 38 item 4). With a
    # symbolic launch a thread's index is bounded only by the model's 2**31 assumption, so
    # v[i] and v[i + nelr] never meet exactly when nelr is past every index: the condition
    # used to be ``-nelr <= -2147483647``, false at every real size. It is not emitted: what
    # remains is a condition that holds for real launches (one block no wider than nelr).
    from polypy.ir.printer import format_expr

    k = prepare(f"""kernel step(nelr: i32, v: const f32*, out: f32*) {{
  out[{GID}] = v[{GID}] * v[{GID} + nelr]
}}
""")
    s = sharing(k, "v")
    assert not s.thread_private
    text = format_expr(s.private_when) if s.private_when is not None else ""
    assert "2147483647" not in text and "1073741823" not in text, text
    assert text == "(i64)blockDim.x - (i64)nelr <= 0l && (i64)gridDim.x <= 1l", text
    # for a fixed launch the question is decided exactly: private when nelr covers the grid
    launch = dict(grid=(4, 1, 1), block=(64, 1, 1))
    assert sharing(k, "v", launch=Launch(**launch, scalars=(("nelr", 256),))).thread_private
    assert not sharing(k, "v", launch=Launch(**launch, scalars=(("nelr", 255),))).thread_private


LINEAR = "(i32)(blockDim.x * (gridDim.x * blockIdx.y + blockIdx.x) + threadIdx.x)"


def test_a_row_major_block_index_tells_blocks_apart() -> None:
    # Rodinia's nn: blockDim.x * (gridDim.x * blockIdx.y + blockIdx.x) + threadIdx.x, one element
    # per thread of a 2-D grid (issue 38: its adjoint was atomic unless the grid had one block)
    k = prepare(f"""kernel k(n: i32, y: f32*) {{
  if ({LINEAR} < n) {{
    y[{LINEAR}] = y[{LINEAR}] * 2.0f
  }}
}}
""")
    s = sharing(k, "y")
    assert s.thread_private and s.accumulation == "plain", s
    assert sharing(k, "y", launch=Launch.of((5, 3, 1), (64, 1, 1), {})).thread_private


def test_what_is_not_a_row_major_block_index_stays_shared() -> None:
    # gridDim.y is not the row length of the grid's x dimension: blocks (0, 1) and (gridDim.y, 0) meet
    wrong = "(i32)(blockDim.x * (gridDim.y * blockIdx.y + blockIdx.x) + threadIdx.x)"
    k = prepare(f"""kernel k(n: i32, y: f32*) {{
  if ({wrong} < n) {{
    y[{wrong}] = y[{wrong}] * 2.0f
  }}
}}
""")
    assert not sharing(k, "y").thread_private
    k = prepare(f"""kernel k(n: i32, y: f32*) {{
  if ({LINEAR} < n) {{
    y[{LINEAR}] = y[{LINEAR}] * 2.0f
  }}
}}
""")
    # blocks that differ only along z share their elements, and so do threads along y
    assert not sharing(k, "y", launch=Launch.of((5, 3, 2), (64, 1, 1), {})).thread_private
    assert not sharing(k, "y", launch=Launch.of((5, 3, 1), (64, 2, 1), {})).thread_private
