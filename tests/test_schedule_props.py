"""Property tests of the CPU schedule passes: random kernels whose thread loops have guards,
strided loops and uniform serial loops, lowered with ``to_cpu`` (schedule included) and run
through the C backend against the emulator on random launches, including the edge cases of
exactness: empty ranges, negative bounds, unsigned wrap-around near 2**31 and 2**32 (where the
run-time checks send execution to the original loops).

Each example builds a batch of kernels into one library (one compiler run per example).
"""
from __future__ import annotations

import numpy as np
import pytest
from c_support import copy_args, gpu_kernel, need_compiler
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polypy.driver.library import build_library
from gpu2cpu.thread_affine import counter_dim
from polypy.driver.pipelines import to_cpu
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir.visitor import walk

SIZE = 4096
SETTINGS = settings(max_examples=10, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Guard atoms over the thread: (text, uses threadIdx.y).
_ATOMS = [
    ("i {op} n", False),
    ("threadIdx.x {op} {u}u", False),
    ("(i32)threadIdx.x {op} m", False),
    ("(i32)(p + threadIdx.x) {op} n", False),
    ("(i32)(threadIdx.x * 2u) {op} m - 3", False),
    ("(i32)threadIdx.y {op} m", True),
    ("(i32)(blockIdx.y * blockDim.y + threadIdx.y) {op} n - 40", True),
    ("i - (i32)threadIdx.x {op} m", False),
    ("x[gid] {fop} 0.0f", False),  # not affine: stays a guard
]
_OPS = ["<", "<=", ">", ">=", "==", "!="]


@st.composite
def conditions(draw, depth: int = 0):
    if depth < 2 and draw(st.integers(0, 2)) == 0:
        a = draw(conditions(depth + 1))
        b = draw(conditions(depth + 1))
        op = draw(st.sampled_from(["&&", "||"]))
        text = f"({a} {op} {b})"
        return f"!{text}" if draw(st.booleans()) else text
    atom, _ = draw(st.sampled_from(_ATOMS))
    return atom.format(op=draw(st.sampled_from(_OPS)), u=draw(st.integers(0, 70)),
                       fop=draw(st.sampled_from(["<", ">"])))


@st.composite
def guard_kernels(draw, name: str):
    """A kernel whose thread loop is guarded (if / if-else / select / early exit)."""
    cond = draw(conditions())
    shape = draw(st.sampled_from(["if", "else", "select", "return", "two"]))
    head = f"""kernel {name}(n: i32, m: i32, p: u32, x: const f32*, y: f32*) {{
  var gid: u32 = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
"""
    if shape == "if":
        body = f"  if ({cond}) {{\n    y[gid] = x[gid] + 1.0f\n  }}\n"
    elif shape == "else":
        body = f"  if ({cond}) {{\n    y[gid] = x[gid] + 1.0f\n  }} else {{\n    y[gid] = (f32)i\n  }}\n"
    elif shape == "select":
        body = f"  y[gid] = {cond} ? x[gid] * 2.0f : y[gid] - 1.0f\n"
    elif shape == "return":
        body = f"  if ({cond}) {{\n    return\n  }}\n  y[gid] = x[gid] + (f32)m\n"
    else:
        other = draw(conditions())
        body = (f"  y[gid] = x[gid]\n  if ({cond}) {{\n    y[gid] = y[gid] + 2.0f\n  }}\n"
                f"  if ({other}) {{\n    y[gid] = y[gid] * 3.0f\n  }}\n")
    return head + body + "}"


@st.composite
def loop_kernels(draw, name: str):
    """A kernel with a strided loop or a uniform serial loop around per-thread work."""
    kind = draw(st.sampled_from(["grid", "block", "uniform", "nested", "while", "stencil"]))
    c = draw(st.integers(0, 3))
    head = f"kernel {name}(n: i32, m: i32, p: u32, x: const f32*, y: f32*) {{\n"
    gid = "(blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x"
    if kind == "grid":
        step = draw(st.sampled_from(["(i32)(blockDim.x * gridDim.x)", "(i32)(blockDim.x * gridDim.x) * 2"]))
        body = (f"  for j: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x) + {c} to n step {step} {{\n"
                f"    y[j + 1000 * (i32)blockIdx.y] = x[j] * 2.0f\n  }}\n")
        body = f"  if (threadIdx.y == 0u) {{\n{body}  }}\n"
    elif kind == "block":
        body = (f"  var s: f32 = 0.0f\n"
                f"  for j: i32 = (i32)threadIdx.x to n step (i32)blockDim.x {{\n"
                f"    s = s + x[j + {c}]\n  }}\n"
                f"  y[{gid}] = s\n")
    elif kind == "uniform":
        body = (f"  var s: f32 = (f32)threadIdx.x\n"
                f"  for k: i32 = {c} to m step 1 {{\n"
                f"    if (k % 3 == 1) {{\n      continue\n    }}\n"
                f"    s = s + x[k * 8 + (i32)threadIdx.x] * x[k]\n  }}\n"
                f"  if ((i32)(blockIdx.x * blockDim.x + threadIdx.x) < n) {{\n    y[{gid}] = s\n  }}\n")
    elif kind == "nested":
        body = (f"  var s: f32 = 0.0f\n"
                f"  var xx: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)\n"
                f"  for a: i32 = -{c} to m step 1 {{\n"
                f"    for b: i32 = -2 to 3 step 1 {{\n"
                f"      if (xx + b >= 0 && xx + b < n) {{\n        s = s + x[(xx + b) % 512 + a + 8]\n      }}\n"
                f"    }}\n  }}\n"
                f"  y[{gid}] = s\n")
    elif kind == "stencil":
        body = (f"  var s: f32 = 0.0f\n"
                f"  var xx: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)\n"
                f"  var yy: i32 = (i32)(blockIdx.y * blockDim.y + threadIdx.y)\n"
                f"  for a: i32 = -1 to 2 step 1 {{\n"
                f"    if (yy + a < 0 || yy + a >= m) {{\n      continue\n    }}\n"
                f"    for b: i32 = -{c} to 3 step 1 {{\n"
                f"      if (xx + b >= 0 && xx + b < n) {{\n        s = s + x[(yy + a) * 64 + xx + b]\n      }}\n"
                f"    }}\n  }}\n"
                f"  if (xx == 0 || xx == n - 1) {{\n    s = -s\n  }}\n"
                f"  y[{gid}] = s\n")
    else:
        body = (f"  var s: f32 = 0.0f\n  var q: f32 = x[{gid}]\n  var k: i32 = 0\n"
                f"  while ((u32)k < blockDim.x + {c}u) {{\n"
                f"    s = s + (x[k] - q) * (x[k] - q)\n  }} update {{\n    k = k + 1\n  }}\n"
                f"  y[{gid}] = s\n")
    return head + body + "}"


@st.composite
def launches(draw):
    bx = draw(st.sampled_from([1, 3, 16, 32, 33, 64]))
    by = draw(st.sampled_from([1, 1, 2, 3]))
    gx = draw(st.integers(1, 3))
    gy = draw(st.integers(1, 2))
    n = draw(st.sampled_from([-5, 0, 1, 17, 100, 250]))
    m = draw(st.integers(-3, 40))
    p = draw(st.sampled_from([0, 7, 2**31 - 20, 2**31 - 1, 2**32 - 10]))
    return (gx, gy), (bx, by), {"n": n, "m": m, "p": p}


def _args(rng: np.random.Generator, scalars: dict) -> dict:
    return {"x": rng.integers(-8, 8, SIZE).astype(np.float32), "y": rng.integers(-8, 8, SIZE).astype(np.float32),
            **scalars}


def _check(texts: list[str], shapes: list) -> None:
    need_compiler()
    kernels = [gpu_kernel(t) for t in texts]
    cpu = [to_cpu(k) for k in kernels]
    lib = build_library(cpu, specialize=False)
    rng = np.random.default_rng(0)
    for k in kernels:
        for grid, block, scalars in shapes:
            args = _args(rng, scalars)
            want = copy_args(args)
            emulate(k, grid, block, want)
            got = copy_args(args)
            lib.launch(k.name, grid, block, got)
            for name in ("x", "y"):
                np.testing.assert_array_equal(got[name], want[name], err_msg=f"{k.name} {grid} {block} {scalars}\n"
                                                                            f"{texts[kernels.index(k)]}")


@SETTINGS
@given(st.tuples(*[guard_kernels(f"g{i}") for i in range(6)]), st.lists(launches(), min_size=3, max_size=3))
def test_guards_match_the_emulator(texts, shapes) -> None:
    _check(list(texts), shapes)


@SETTINGS
@given(st.tuples(*[loop_kernels(f"l{i}") for i in range(5)]), st.lists(launches(), min_size=3, max_size=3))
def test_loops_match_the_emulator(texts, shapes) -> None:
    _check(list(texts), shapes)


def test_the_schedule_changes_what_it_should() -> None:
    """Not vacuous: guards become bounds and serial loops go outside the loop over tx."""
    guarded = to_cpu(gpu_kernel("""kernel k(n: i32, y: f32*) {
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      if (i < n) {
        y[i] = 1.0f
      }
    }"""))
    loops = [x for x in walk(guarded) if isinstance(x, n.For) and x.kind == "threads" and counter_dim(x.var) == 0]
    assert any(x.stop != n.BlockDim(0) and not any(isinstance(s, n.If) for s in x.body) for x in loops)
    sunk = to_cpu(gpu_kernel("""kernel k(m: i32, x: const f32*, y: f32*) {
      var s: f32 = 0.0f
      for k: i32 = 0 to m step 1 {
        s = s + x[k * 64 + (i32)threadIdx.x]
      }
      y[threadIdx.x] = s
    }"""))
    serial = [x for x in walk(sunk) if isinstance(x, n.For) and x.kind == "serial"]
    assert serial and any(isinstance(y, n.For) and y.kind == "threads" for y in walk(serial[0]))


@pytest.mark.parametrize("block", [(16, 4), (64, 1)])
def test_specialized_launchers_agree(block) -> None:
    """The same scheduled kernel, compiled for one block shape (constant blockDim)."""
    need_compiler()
    text = """kernel k(n: i32, x: const f32*, y: f32*) {
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      var s: f32 = 0.0f
      for j: i32 = (i32)threadIdx.y to n step (i32)blockDim.y {
        s = s + x[(j * 7) % 512]
      }
      if (i < n && threadIdx.y == 1u) {
        y[i] = s
      }
    }"""
    kernel = gpu_kernel(text)
    lib = build_library([to_cpu(kernel)])
    args = _args(np.random.default_rng(1), {"n": 90})
    want = copy_args(args)
    emulate(kernel, 3, block, want)
    got = copy_args(args)
    lib.launch("k", 3, block, got)
    np.testing.assert_array_equal(got["y"], want["y"])


def test_the_pipeline_reports_and_optimize_false_turns_the_schedule_off() -> None:
    text = """kernel k(n: i32, y: f32*) {
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      if (i < n) {
        y[i] = 1.0f
      }
    }"""
    report: list = []
    to_cpu(gpu_kernel(text), report=report)
    lines = [d.format() for d in report]
    assert any("guard" in x and "decided by the range of tx" in x for x in lines), lines
    plain = to_cpu(gpu_kernel(text), optimize=False)
    loops = [x for x in walk(plain) if isinstance(x, n.For) and x.kind == "threads"]
    assert [x.stop for x in loops] == [n.BlockDim(2), n.BlockDim(1), n.BlockDim(0)]
