"""Golden tests of the target-independent passes: IR text in, pass, IR text out.

Each pass is also checked for semantics on a kernel run by the emulator before and after.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from polypy.analysis.uniformity import check_barriers, thread_dependent_names
from polypy.emulator import emulate
from polypy.errors import InternalError, UserError
from polypy.ir import parse_kernel, print_kernel
from polypy.passes import Pass, eliminate_dead_code, fold_constants, forward_scalars, run_pipeline
from polypy.passes.eliminate_returns import eliminate_returns


def golden(pass_fn, before: str, after: str) -> None:
    result = pass_fn(parse_kernel(textwrap.dedent(before)))
    assert print_kernel(result) == textwrap.dedent(after).lstrip("\n")


def test_fold_constants_identities_and_c_semantics():
    golden(fold_constants, """
    kernel k(n: i32, x: f32*) {
      x[n + 0] = x[1 * n] * 1.0f + 0.0f
      x[n - 0 + 2 + 3] = (f32)(7 / -2) + (f32)(-7 % 2)
      x[0] = (f32)((u32)((i32)threadIdx.x)) + (f32)(5 / 0)
      if (3 < 4 && n > 0) {
        x[1] = 1.0f
      } else {
        x[1] = 2.0f
      }
      var b: bool = false || n > 1
    }
    """, """
    kernel k(n: i32, x: f32*) {
      x[n] = x[n] + 0.0f
      x[n + 5] = -4.0f
      x[0] = (f32)threadIdx.x + (f32)(5 / 0)
      if (n > 0) {
        x[1] = 1.0f
      } else {
        x[1] = 2.0f
      }
      var b: bool = n > 1
    }
    """)


def test_forward_scalars_keeps_source_names_as_lets_and_forwards_the_rest():
    """Source-named index arithmetic stays, as bindings read by name (``let``); a compiler
    temporary (``p_off``) and a plain copy (``tid``) are substituted into their uses; values that
    load or compute floats stay variables."""
    golden(forward_scalars, """
    kernel k(n: i32, x: f32*) {
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      var tid: i32 = (i32)threadIdx.x
      var p_off: i32 = i + 2
      var v: f32 = x[i]
      var w: f32 = exp(v)
      var j: i32 = i + 1
      var m: i32 = 0
      m = 3
      x[j] = w + v + (f32)m
      x[p_off + tid] = 0.0f
    }
    """, """
    kernel k(n: i32, x: f32*) {
      let i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      var v: f32 = x[i]
      var w: f32 = exp(v)
      let j: i32 = i + 1
      var m: i32 = 0
      m = 3
      x[j] = w + v + (f32)m
      x[i + 2 + (i32)threadIdx.x] = 0.0f
    }
    """)


def test_eliminate_dead_code():
    golden(eliminate_dead_code, """
    kernel k(x: f32*, c: i32*) {
      var unused: f32 = x[0]
      var a: i32 = 0
      a = 5
      var old: i32
      old = atomic.add c[0], 1
      while (true) {
        break
        x[1] = 2.0f
      }
      if (a > 3) {
      }
    }
    """, """
    kernel k(x: f32*, c: i32*) {
      atomic.add c[0], 1
      while (true) {
        break
      }
    }
    """)


def _dead_chain(links: int) -> str:
    body = "\n".join(f"  var t{j}: f32 = t{j - 1} * 2.0f" for j in range(1, links))
    return f"kernel k(x: f32*) {{\n  var t0: f32 = x[0]\n{body}\n  var keep: f32 = x[1]\n  x[2] = keep\n}}\n"


def test_eliminate_dead_code_removes_a_chain_of_dead_locals_in_one_sweep(monkeypatch):
    """``t0 -> t1 -> ... -> t199``, none read by anything that stays: the liveness of one sweep
    already knows all of them are dead (each sweep removed the last link only: 200 sweeps of the
    whole kernel, quadratic in the chain). Counted: the sweeps (``_Dce`` passes) for 100 and 200
    links are the same few."""
    import importlib

    dce = importlib.import_module("polypy.passes.eliminate_dead_code")  # also a function's name
    sweeps = [0]

    class Counting(dce._Dce):
        def __init__(self, live):
            sweeps[0] += 1
            super().__init__(live)

    monkeypatch.setattr(dce, "_Dce", Counting)
    counts = []
    for links in (100, 200):
        sweeps[0] = 0
        result = dce.eliminate_dead_code(parse_kernel(_dead_chain(links)))
        assert print_kernel(result) == "kernel k(x: f32*) {\n  var keep: f32 = x[1]\n  x[2] = keep\n}\n"
        counts.append(sweeps[0])
    assert counts[0] == counts[1] <= 3, counts


def test_eliminate_dead_code_keeps_locals_that_read_each_other():
    # a cycle nothing else reads stays (as it did when dead definitions went one sweep at a time);
    # a definition read only by a dead one goes with it
    golden(eliminate_dead_code, """
    kernel k(x: f32*, n: i32) {
      var a: f32 = x[0]
      var b: f32 = x[1]
      var c: f32 = x[2]
      var d: f32 = c + 1.0f
      for i: i32 = 0 to n step 1 {
        a = b + 1.0f
        b = a * 2.0f
      }
      x[3] = 1.0f
    }
    """, """
    kernel k(x: f32*, n: i32) {
      var a: f32 = x[0]
      var b: f32 = x[1]
      for i: i32 = 0 to n step 1 {
        a = b + 1.0f
        b = a * 2.0f
      }
      x[3] = 1.0f
    }
    """)


def test_eliminate_dead_code_drops_assignments_overwritten_before_any_read():
    # `a = sin(sin(a))` is overwritten by `a = b` before anything reads it, and then `a = pow(..)`
    # too; an assignment before a read, or before an exit of the loop, stays.
    golden(eliminate_dead_code, """
    kernel k(x: f64*, n: i32) {
      var a: f64 = x[0]
      var b: f64 = x[1]
      a = pow(a, 0.5)
      a = sin(sin(a))
      a = b
      x[2] = a
      for i: i32 = 0 to n step 1 {
        b = b * 2.0
        if (b > 4.0) {
          break
        }
        b = 1.0
        x[3] = b
        b = 3.0
        b = b + 1.0
      }
      x[4] = b
    }
    """, """
    kernel k(x: f64*, n: i32) {
      var a: f64 = x[0]
      var b: f64 = x[1]
      a = b
      x[2] = a
      for i: i32 = 0 to n step 1 {
        b = b * 2.0
        if (b > 4.0) {
          break
        }
        b = 1.0
        x[3] = b
        b = 3.0
        b = b + 1.0
      }
      x[4] = b
    }
    """)


def test_forward_scalars_forwards_a_local_reset_to_one_stable_value():
    # lavaMD: ``wtx = tx;`` before each block-stride loop; a different value or a load is kept.
    golden(forward_scalars, """
    kernel k(n: i32, x: f32*) {
      var tx: i32 = (i32)threadIdx.x
      var w: i32
      var v: i32
      var u: i32
      w = tx
      v = tx
      u = (i32)x[0]
      for a: i32 = w to n step 128 {
        x[a] = (f32)v
        w = tx
        v = n
        u = (i32)x[1]
      }
      x[w] = (f32)(v + u)
    }
    """, """
    kernel k(n: i32, x: f32*) {
      var v: i32
      var u: i32
      v = (i32)threadIdx.x
      u = (i32)x[0]
      for a: i32 = (i32)threadIdx.x to n step 128 {
        x[a] = (f32)v
        v = n
        u = (i32)x[1]
      }
      x[(i32)threadIdx.x] = (f32)(v + u)
    }
    """)


def test_forward_scalars_keeps_a_parameter_assigned_one_value():
    # A parameter holds its argument until it is assigned: only locals declared without a value
    # are reset locals.
    text = """
    kernel k(n: i32, x: f32*) {
      x[0] = (f32)n
      n = 5
      x[1] = (f32)n
    }
    """
    golden(forward_scalars, text, text)


def test_eliminate_returns_restructures_early_exits_without_flags():
    golden(eliminate_returns, """
    kernel k(n: i32, x: f32*) {
      var i: i32 = (i32)threadIdx.x
      if (i >= n) {
        return
      }
      x[i] = 1.0f
      if (i == 0) {
        x[0] = 2.0f
        return
      }
      x[i] = 3.0f
    }
    """, """
    kernel k(n: i32, x: f32*) {
      var i: i32 = (i32)threadIdx.x
      if (i >= n) {
      } else {
        x[i] = 1.0f
        if (i == 0) {
          x[0] = 2.0f
        } else {
          x[i] = 3.0f
        }
      }
    }
    """)


RETURN_IN_LOOP = """
kernel k(n: i32, x: f32*) {
  var i: i32 = (i32)threadIdx.x
  for j: i32 = 0 to n step 1 {
    if (x[j] < 0.0f) {
      return
    }
    x[j] = x[j] + (f32)i
  }
  x[i] = -1.0f
}
"""


def test_eliminate_returns_uses_a_flag_for_returns_in_loops_and_keeps_semantics():
    k = parse_kernel(RETURN_IN_LOOP)
    k2 = eliminate_returns(k)
    text = print_kernel(k2)
    assert "return" not in text and "var done: bool = false" in text
    assert "if (done) {" not in text  # the break that sets the flag already left the loop
    assert "if (!done) {" in text
    nested = parse_kernel(RETURN_IN_LOOP.replace("for j: i32 = 0 to n step 1 {",
                                                  "for r: i32 = 0 to 2 step 1 {\n  for j: i32 = 0 to n step 1 {")
                          .replace("  x[i] = -1.0f", "  }\n  x[i] = -1.0f"))
    assert "if (done) {" in print_kernel(eliminate_returns(nested))  # the inner break only left the inner loop
    for kernel in (k, k2, nested, eliminate_returns(nested)):
        x = np.array([1.0, 2.0, -1.0, 4.0], dtype=np.float32)
        emulate(kernel, 1, 1, [4, x], check_races=False)
        np.testing.assert_allclose(x, [1, 2, -1, 4])


def test_pipeline_names_the_failing_pass_and_dumps_ir(capsys):
    def broken(k):
        raise ValueError("boom")

    k = parse_kernel("kernel k(x: f32*) {\n  x[0] = 1.0f\n}")
    with pytest.raises(InternalError, match="in pass breaker"):
        run_pipeline(k, (Pass("breaker", broken),))
    import io

    out = io.StringIO()
    timings: dict[str, float] = {}
    run_pipeline(k, (Pass("fold", fold_constants),), print_after="fold", stream=out, timings=timings)
    assert "IR after fold" in out.getvalue() and "fold" in timings


def test_pipeline_verifies_after_each_pass():
    def corrupt(k):
        from polypy.ir import nodes as n
        import dataclasses

        return dataclasses.replace(k, body=(n.Break(),))

    k = parse_kernel("kernel k(x: f32*) {\n  x[0] = 1.0f\n}")
    with pytest.raises(InternalError, match="after pass corrupt"):
        run_pipeline(k, (Pass("corrupt", corrupt),))


def test_uniformity_analysis():
    k = parse_kernel("""kernel k(n: i32, x: f32*) {
      shared s: f32[64]
      var t: u32 = threadIdx.x
      var stride: u32 = blockDim.x / 2u
      var v: f32 = s[0]
      var w: f32 = s[t]
      var flag: i32 = 0
      if (t < 3u) {
        flag = 1
      }
      while (stride > 0u) {
        barrier
      } update {
        stride = stride >> 1u
      }
    }""")
    names = thread_dependent_names(k)
    assert {"t", "w", "flag"} <= names
    assert not {"stride", "v"} & names
    check_barriers(k)
    bad = parse_kernel("""kernel k(x: f32*) {
      var t: u32 = threadIdx.x
      for j: i32 = 0 to 4 step 1 {
        if (x[t] > (f32)j) {
          break
        }
        barrier
      }
    }""")
    with pytest.raises(UserError, match="thread-dependent") as info:
        check_barriers(bad)
    assert info.value.loc.line == 7
