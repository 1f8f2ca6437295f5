"""Conditions decided on a range of the threads (``gpu2cpu.version_thread_loops.box_range``,
step 3 of ``tighten_thread_bounds`` with its ``ranges`` option, which ``to_cpu(..., wide=True)``
and coarse blocks set): in a block on the border of a stencil, the threads away
from the border run the loop with its conditions decided (one copy per value), the threads
near it run the loop with its conditions. Checked through the C backend and the LLVM JIT
against the emulator on launches whose blocks straddle one border, both borders, or none,
for every comparison operator, counter coefficients +1 and -1, and conditions on a short
serial loop alone (``yy + a < 0``, the same for every thread).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
from c_support import copy_args, gpu_kernel, need_compiler
from test_llvm_support import compile_cpu, run_compiled

from polypy.driver.library import build_library
from polypy.driver.pipelines import to_cpu
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir.queries import let_values, substitute_lets
from polypy.ir.visitor import walk

# A 2-D stencil with the bounds checks of a 5-wide window along x and 3 rows along y, a
# boundary test, and one comparison of each operator, with the counter's coefficient +1 and -1.
STENCIL = """kernel stencil(n: i32, m: i32, q: i32, x: const f32*, y: f32*) {
  var xx: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  var yy: i32 = (i32)(blockIdx.y * blockDim.y + threadIdx.y)
  if (xx < n && yy < m) {
    var s: f32 = 0.0f
    for a: i32 = -1 to 2 step 1 {
      if (yy + a < 0 || yy + a >= m) {
        continue
      }
      for b: i32 = -2 to 3 step 1 {
        if (xx + b >= 0 && xx + b < n) {
          s = s + x[(yy + a) * 640 + xx + b]
        }
      }
    }
    if (xx == 0 || xx == n - 1) {
      s = -s
    }
    y[yy * 640 + xx] = s
  }
}"""

# One comparison per kernel, in a short loop: ``{expr} {op} 0`` with the counter's coefficient
# +1 (``xx + b - q``) or -1 (``q - xx - b``).
CMP = """kernel cmp_{tag}(n: i32, m: i32, q: i32, x: const f32*, y: f32*) {{
  var xx: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  if (xx < n) {{
    var s: f32 = 0.0f
    for b: i32 = -3 to 2 step 1 {{
      if ({expr} {op} 0) {{
        s = s + x[xx + b + 8]
      }} else {{
        s = s - 1.0f
      }}
    }}
    y[xx] = s
  }}
}}"""
_OPS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_EXPRS = {"up": "xx + b - q", "down": "q - xx - b"}


def _cmp_kernels() -> list[str]:
    return [CMP.format(tag=f"{op}_{way}", expr=expr, op=sym)
            for op, sym in _OPS.items() for way, expr in _EXPRS.items()]


def _ranged(kernel: n.Kernel) -> bool:
    """Whether some thread loop over tx runs from a computed first thread (``tx_in``)."""
    return any(isinstance(x, n.For) and x.kind == "threads" and isinstance(x.start, n.Var)
               and x.start.name.startswith("tx_in") for x in walk(kernel))


@functools.cache
def _compiled(texts: tuple[str, ...]):
    """The kernels (GPU form), compiled once per module run: the C library and the LLVM JIT."""
    kernels = [gpu_kernel(t) for t in texts]
    cpu = [to_cpu(k, wide=True) for k in kernels]
    assert all(_ranged(k) for k in cpu), "the conditions are not decided on a range of the threads"
    return kernels, build_library(cpu, specialize=False), compile_cpu(*cpu)


def _check(texts: list[str], launches: list[tuple]) -> None:
    need_compiler()
    kernels, lib, jit = _compiled(tuple(texts))
    rng = np.random.default_rng(7)
    for k in kernels:
        for grid, block, scalars in launches:
            args = {"x": rng.integers(-8, 8, 640 * 10).astype(np.float32),
                    "y": rng.integers(-8, 8, 640 * 10).astype(np.float32), **scalars}
            want = copy_args(args)
            emulate(k, grid, block, want)
            got = copy_args(args)
            lib.launch(k.name, grid, block, got)
            np.testing.assert_array_equal(got["y"], want["y"], err_msg=f"C: {k.name} {grid} {block} {scalars}")
            got = copy_args(args)
            run_compiled(jit, k.name, grid, block, got)
            np.testing.assert_array_equal(got["y"], want["y"], err_msg=f"LLVM: {k.name} {grid} {block} {scalars}")


# Blocks of at least RANGE_MIN_THREADS (256) along x decide on a range; n = 600 puts the
# borders of a block row in its first and last block, n = 3 and 1 put both in one block, n =
# 512 ends on a block boundary. Blocks of 48 check the conditions for the whole block instead.
_STENCIL_LAUNCHES = [((3, 2), (256, 4), {"n": 600, "m": 7, "q": 0}),
                     ((1, 1), (256, 2), {"n": 3, "m": 2, "q": 0}),
                     ((1, 3), (512, 1), {"n": 1, "m": 3, "q": 0}),
                     ((2, 2), (256, 4), {"n": 512, "m": 8, "q": 0}),
                     ((3, 1), (48, 3), {"n": 140, "m": 3, "q": 0})]


def test_stencil_border_blocks_match_the_emulator() -> None:
    _check([STENCIL], _STENCIL_LAUNCHES)


@pytest.mark.parametrize("q", [-5, 0, 1, 30, 255, 258, 520, 700])
def test_each_comparison_on_a_range_matches_the_emulator(q: int) -> None:
    launches = [((3, 1), (256, 1), {"n": 600, "m": 1, "q": q}), ((1, 1), (512, 1), {"n": 9, "m": 1, "q": q}),
                ((1, 1), (16, 1), {"n": 9, "m": 1, "q": q})]
    _check(_cmp_kernels(), launches)


def test_only_wide_kernels_get_the_range_version() -> None:
    """Kernels for any block shape keep the whole-block check alone (compile time)."""
    assert not _ranged(to_cpu(gpu_kernel(STENCIL)))


def test_a_border_block_runs_its_middle_threads_without_the_conditions() -> None:
    """The range version's middle loop tests nothing that depends on its thread (its ``if`` s
    test the flags computed once per row: three here, more than get one copy each), and the
    loops before and after it keep the bounds checks."""
    cpu = to_cpu(gpu_kernel(STENCIL), wide=True)
    loops = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads" and x.var.startswith("tx")]
    middle = [x for x in loops if isinstance(x.start, n.Var) and x.start.name.startswith("tx_in")
              and isinstance(x.stop, n.Var) and x.stop.name.startswith("tx_out")]
    edges = [x for x in loops if isinstance(x.stop, n.Var) and x.stop.name.startswith("tx_in")]
    assert middle and edges
    for loop in middle:
        tests = [s.cond for s in walk(loop) if isinstance(s, n.If)]
        assert tests and all(isinstance(c, n.Var) and c.name.startswith("tx_c") for c in tests)
    for loop in edges:  # (the thread's named coordinates, `let xx = ... + tx`, looked through)
        tests = [substitute_lets(s.cond, let_values(loop)) for s in walk(loop) if isinstance(s, n.If)]
        assert any(isinstance(v, n.Var) and v.name == loop.var for c in tests for v in walk(c))
