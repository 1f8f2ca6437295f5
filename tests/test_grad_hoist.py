"""hoist_invariants: loop-invariant local computations leave their loops (and only those)."""
from __future__ import annotations

import numpy as np
import pytest

from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir import parse_kernel, print_kernel
from polypy.ir.visitor import walk
from polypy.passes import SIMPLIFY, run_pipeline
from polypy.passes.hoist_invariants import hoist_invariants


def prepare(text: str) -> n.Kernel:
    return run_pipeline(parse_kernel(text), SIMPLIFY)


def loops(kernel: n.Kernel) -> list[n.Stmt]:
    return [s for s in walk(kernel) if isinstance(s, (n.For, n.While))]


def same_results(a: n.Kernel, b: n.Kernel, args: dict) -> None:
    x, y = ({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()} for _ in range(2))
    emulate(a, 1, 1, x)  # one thread: the loops are the thread's own
    emulate(b, 1, 1, y)
    for key in x:
        if isinstance(x[key], np.ndarray):
            np.testing.assert_array_equal(x[key], y[key])


NORM = """kernel norm(in: const f64* restrict, out: f64* restrict, n: i32) {
  for i: i32 = 0 to n step 1 {
    var s: f64 = 0.0
    for j: i32 = 0 to n step 1 {
      s = s + in[j] * in[j]
    }
    var m: f64 = sqrt(s)
    out[i] = in[i] / m
  }
}
"""


def test_invariant_loop_and_its_result_leave_the_loop() -> None:
    k = prepare(NORM)
    h = hoist_invariants(k)
    assert print_kernel(h) == """kernel norm(in: const f64* restrict, out: f64* restrict, n: i32) {
  var s: f64
  var m: f64
  if (0 < n) {
    s = 0.0
    for j: i32 = 0 to n step 1 {
      s = s + in[j] * in[j]
    }
    m = sqrt(s)
  }
  for i: i32 = 0 to n step 1 {
    out[i] = in[i] / m
  }
}
"""
    for size in (0, 1, 9):
        same_results(k, h, {"in": np.random.default_rng(size).standard_normal(max(size, 1)),
                            "out": np.zeros(max(size, 1)), "n": size})


def test_possible_aliasing_keeps_loads_in_the_loop() -> None:
    k = prepare(NORM.replace(" restrict", ""))
    assert hoist_invariants(k) is k
    assert len(loops(hoist_invariants(k, assume_noalias=True))) == 2
    assert print_kernel(hoist_invariants(k, assume_noalias=True)).index("if (0 < n)") < \
        print_kernel(hoist_invariants(k, assume_noalias=True)).index("for i")


@pytest.mark.parametrize("body", [
    "var t: f64 = out[0]\n    out[i] = t",  # reads memory the loop writes
    "out[0] = 1.0\n    out[i] = 2.0",  # a store
    "var t: f64 = (f64)i\n    out[i] = t",  # depends on the loop variable
    "if (i == 3) {\n      break\n    }\n    var t: f64 = 2.0 * in[0]\n    out[i] = t",  # after a possible exit
])
def test_not_invariant(body: str) -> None:
    k = prepare(f"""kernel f(in: const f64* restrict, out: f64* restrict, n: i32) {{
  for i: i32 = 0 to n step 1 {{
    {body}
  }}
}}
""")
    assert hoist_invariants(k) is k


def test_variables_written_by_code_that_stays_are_not_hoisted() -> None:
    k = prepare("""kernel f(in: const f64* restrict, out: f64* restrict, n: i32) {
  for i: i32 = 0 to n step 1 {
    var t: f64 = in[0]
    if (in[i] > 0.0) {
      t = in[i]
    }
    out[i] = t
  }
}
""")
    assert hoist_invariants(k) is k


def test_invariants_leave_nested_loops_as_far_as_they_can() -> None:
    k = prepare("""kernel f(in: const f64* restrict, out: f64* restrict, n: i32, m: i32) {
  for i: i32 = 0 to n step 1 {
    for j: i32 = 0 to m step 1 {
      var c: f64 = in[0] * 2.0
      var r: f64 = in[i] + c
      out[i * m + j] = r
    }
  }
}
""")
    h = hoist_invariants(k)
    text = print_kernel(h)
    assert text.index("c = in[0] * 2.0") < text.index("for i")  # out of both loops
    assert text.index("r = in[i] + c") > text.index("for i")  # out of j only
    assert text.index("r = in[i] + c") < text.index("for j")
    args = {"in": np.random.default_rng(0).standard_normal(6), "out": np.zeros(12), "n": 3, "m": 4}
    same_results(k, h, args)


def test_while_loops_are_guarded_by_their_condition() -> None:
    k = prepare("""kernel f(in: const f64* restrict, out: f64* restrict, n: i32) {
  var i: i32 = 0
  while (i < n) {
    var c: f64 = exp(in[0])
    out[i] = c
    i = i + 1
  }
}
""")
    h = hoist_invariants(k)
    assert "if (i < n) {\n    c = exp(in[0])" in print_kernel(h)
    same_results(k, h, {"in": np.ones(1), "out": np.zeros(5), "n": 5})
