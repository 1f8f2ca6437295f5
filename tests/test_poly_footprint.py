"""Footprints of pointer parameters for a launch (``polypy.poly.footprint``)."""
from __future__ import annotations

from polypy.ir import parse_kernel
from polypy.passes import SIMPLIFY, run_pipeline
from polypy.poly import Footprint, IndexRange, footprint, symbolic_footprint

GID = "(i32)(blockIdx.x * blockDim.x + threadIdx.x)"


def prepare(text: str):
    return run_pipeline(parse_kernel(text), SIMPLIFY)


def bounds(r: IndexRange | None) -> tuple | None:
    return None if r is None else (r.lo, r.hi, r.exact)


SAXPY = prepare(f"""kernel saxpy(n: i32, a: f32, x: const f32*, y: f32*) {{
  var i: i32 = {GID}
  if (i < n) {{
    y[i] = a * x[i] + y[i]
  }}
}}
""")


def test_saxpy_guarded_by_n() -> None:
    fp = footprint(SAXPY, 4, 256, {"n": 1000, "a": 2.0})
    assert bounds(fp["x"].read) == (0, 999, True) and fp["x"].write is None
    assert bounds(fp["y"].read) == (0, 999, True) and bounds(fp["y"].write) == (0, 999, True)
    assert fp["y"].required_size == 1000
    assert fp["y"].fits(1000) and not fp["y"].fits(999)


def test_saxpy_limited_by_the_grid() -> None:
    fp = footprint(SAXPY, (4,), (256,), {"n": 5000, "a": 2.0})
    assert bounds(fp["x"].read) == (0, 1023, True)
    assert footprint(SAXPY, 4, 256, {"n": 0, "a": 2.0})["x"].read is None  # nothing runs


def test_two_dimensional() -> None:
    k = prepare("""kernel scale2d(w: i32, h: i32, a: const f32*, b: f32*) {
  var x: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  var y: i32 = (i32)(blockIdx.y * blockDim.y + threadIdx.y)
  if (x < w && y < h) {
    b[y * w + x] = a[x * h + y] * 2.0f
  }
}
""")
    fp = footprint(k, (4, 3), (16, 16), {"w": 50, "h": 40})
    assert bounds(fp["a"].read) == (0, 1999, True)
    assert bounds(fp["b"].write) == (0, 1999, True)
    # A grid too small to cover the array touches less.
    fp = footprint(k, (1, 1), (16, 16), {"w": 50, "h": 40})
    assert bounds(fp["b"].write) == (0, 15 * 50 + 15, True)


def test_stencil_neighbours() -> None:
    k = prepare(f"""kernel stencil(n: i32, x: const f32*, y: f32*) {{
  var i: i32 = {GID}
  if (i >= 1 && i < n - 1) {{
    y[i] = x[i - 1] + x[i] + x[i + 1]
  }}
}}
""")
    fp = footprint(k, 2, 64, {"n": 100})
    assert bounds(fp["x"].read) == (0, 99, True)
    assert bounds(fp["y"].write) == (1, 98, True)
    assert fp["y"].read is None


def test_data_dependent_indices_are_unknown() -> None:
    k = prepare(f"""kernel gather(n: i32, idx: const i32*, x: const f32*, y: f32*) {{
  var i: i32 = {GID}
  if (i < n) {{
    y[i] = x[idx[i]]
  }}
}}
""")
    fp = footprint(k, 2, 64, {"n": 100})
    assert bounds(fp["idx"].read) == (0, 99, True)
    assert bounds(fp["x"].read) == (None, None, False)
    assert fp["x"].required_size is None and fp["x"].fits(10**9) is None
    assert bounds(fp["y"].write) == (0, 99, True)


def test_data_dependent_condition_over_approximates() -> None:
    k = prepare(f"""kernel k(n: i32, flag: const i32*, y: f32*) {{
  var i: i32 = {GID}
  if (flag[i] > 0) {{
    y[i + 10] = 1.0f
  }}
}}
""")
    fp = footprint(k, 1, 32, {"n": 32})
    assert bounds(fp["y"].write) == (10, 41, False)  # a sound bound, maybe not reached


def test_loops_with_known_trip_counts_and_grid_stride() -> None:
    k = prepare(f"""kernel rows(n: i32, m: i32, x: const f32*, y: f32*) {{
  var i: i32 = {GID}
  for j: i32 = i to n step (i32)(blockDim.x * gridDim.x) {{
    var acc: f32 = 0.0f
    for c: i32 = 0 to m step 1 {{
      acc = acc + x[j * m + c]
    }}
    y[j] = acc
  }}
}}
""")
    fp = footprint(k, 2, 32, {"n": 100, "m": 3})
    assert bounds(fp["x"].read) == (0, 299, True)
    assert bounds(fp["y"].write) == (0, 99, True)


def test_atomics_read_and_write() -> None:
    k = prepare(f"""kernel hist(n: i32, x: const i32*, bins: i32*, total: i32*) {{
  var i: i32 = {GID}
  if (i < n) {{
    atomic.add bins[x[i]], 1
    atomic.add total[(i32)blockIdx.x], 1
  }}
}}
""")
    fp = footprint(k, 3, 32, {"n": 70})
    assert bounds(fp["total"].read) == (0, 2, True) and bounds(fp["total"].write) == (0, 2, True)
    assert bounds(fp["bins"].write) == (None, None, False)


def test_untouched_parameter() -> None:
    k = prepare("kernel k(x: f32*, y: f32*) {\n  y[threadIdx.x] = 1.0f\n}\n")
    fp = footprint(k, 1, 8, {})
    assert fp["x"] == Footprint("x", None, None)
    assert fp["x"].required_size == 0 and fp["x"].fits(0)


def test_symbolic_footprint_is_a_function_of_the_launch() -> None:
    sym = symbolic_footprint(SAXPY)
    read, write = sym["y"]
    assert "0 <= i < n" in read and "y[i]" in read
    assert sym["x"][1] is None


def test_loads_guarded_by_select_and_short_circuit_are_exact() -> None:
    k = prepare(f"""kernel k(n: i32, x: const f32*, y: f32*) {{
  y[{GID}] = {GID} < n ? x[{GID} + 5] : 0.0f
  if ({GID} >= n || x[{GID}] > 0.0f) {{
    y[{GID}] = 1.0f
  }}
}}
""")
    fp = footprint(k, 2, 32, {"n": 40})
    # x[i + 5] only where i < n, x[i] only where i < n (|| skips it otherwise).
    assert bounds(fp["x"].read) == (0, 44, True)
    assert bounds(fp["y"].write) == (0, 63, True)
