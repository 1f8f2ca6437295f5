"""The steps of the CPU schedule passes as passes of their own: ``distribute-thread-loops``
(fission), ``version-thread-loops`` (versioning on block-constant conditions) and
``normalize-grid-stride``, each taken from the registry, applied to a lowered kernel
(``serialize-threads``), compiled with the C backend and compared with the emulator on the GPU
form, over launches that take the fast path and launches whose run-time check sends them to the
original loop. A pass with nothing to do returns its input, the very same object.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from c_support import copy_args, need_compiler

from polypy.driver.library import build_library
from polypy.driver.pipelines import make_pass, to_cpu
from polypy.driver.source import load
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir import parse_kernel, print_kernel, verify_kernel
from polypy.ir.types import PointerType
from polypy.ir.visitor import walk

GRID_STRIDE = """
__global__ void scale(int n, const float* x, float* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = 2.0f * x[i] + 1.0f;
}
"""

STENCIL = """
__global__ void blur(int n, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float acc = 0.0f;
    for (int d = -2; d <= 2; d++) {
      if (i + d >= 0 && i + d < n) acc += x[i + d];
    }
    y[i] = acc;
  }
}
"""

TWO_PARTS = """
__global__ void two(int n, const float* x, float* y, float* z) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  if (i < n) y[i] = 2.0f * v;
  if (threadIdx.x < 3) z[blockIdx.x * 3 + threadIdx.x] = 1.0f;
}
"""

# (source, pass, something the result must contain, launches (grid, block, n); size of arrays)
CASES = {
    "normalize-grid-stride": (GRID_STRIDE, "i_base", [(2, 32, 200), (3, 64, 1000), (1, 32, 7)]),
    "version-thread-loops": (STENCIL, "tx_c", [(4, 32, 128), (3, 32, 70), (1, 32, 5)]),
    "distribute-thread-loops": (TWO_PARTS, None, [(2, 32, 64), (3, 32, 50)]),
}
SIZE = 1200


def lowered(source: str) -> tuple[n.Kernel, n.Kernel]:
    gpu = load(None, text=source).kernels[0]
    return gpu, make_pass("serialize-threads").run(gpu)


def thread_loops(kernel: n.Kernel) -> int:
    return sum(1 for x in walk(kernel) if isinstance(x, n.For) and x.kind == "threads")


def run_both(gpu: n.Kernel, cpu: n.Kernel, grid: int, block: int, size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    args: dict = {}
    for p in gpu.params:
        if isinstance(p.ptype, PointerType):
            args[p.name] = rng.integers(-8, 8, SIZE).astype(np.float32)
        else:
            args[p.name] = size
    expected = copy_args(args)
    emulate(gpu, (grid, 1, 1), (block, 1, 1), expected)
    got = copy_args(args)
    build_library([cpu]).launch(cpu.name, (grid, 1, 1), (block, 1, 1), got)
    for name, value in expected.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(got[name], value, err_msg=f"{name}, grid {grid}, block {block}, n {size}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_step_transforms_and_agrees_with_emulator(name: str) -> None:
    need_compiler()
    source, marker, launches = CASES[name]
    gpu, cpu = lowered(source)
    report: list = []
    out = make_pass(name, report=report).run(cpu)
    verify_kernel(out)
    assert out is not cpu and report, "the pass did nothing"
    text = print_kernel(out)
    if marker is not None:
        assert marker in text
    else:
        assert thread_loops(out) > thread_loops(cpu)
    for grid, block, size in launches:
        run_both(gpu, out, grid, block, size, seed=grid)


@pytest.mark.parametrize("name", sorted(CASES))
def test_step_with_nothing_to_do_returns_its_input(name: str) -> None:
    # A kernel without strided loops, block-constant conditions or independent parts ...
    _, plain = lowered("__global__ void cp(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }")
    assert make_pass(name).run(plain) is plain
    # ... and a kernel the pass already transformed.
    _, cpu = lowered(CASES[name][0])
    once = make_pass(name).run(cpu)
    assert make_pass(name).run(once) is once


def test_grid_stride_needs_checked_at_run_time() -> None:
    """With an unsigned counter and a step that may be 0, the original loop is kept as the fallback."""
    need_compiler()
    source = """
__global__ void fill(unsigned n, unsigned step, float* y) {
  for (unsigned i = threadIdx.x; i < n; i += step) y[i] = 1.0f + i;
}
"""
    gpu, cpu = lowered(source)
    out = make_pass("normalize-grid-stride").run(cpu)
    text = print_kernel(out)
    assert "i_base" in text and "else" in text
    for step, size in ((32, 100), (40, 1000), (0, 0)):
        args = {"n": size, "step": step, "y": np.zeros(SIZE, np.float32)}
        expected = copy_args(args)
        emulate(gpu, (1, 1, 1), (32, 1, 1), expected)
        got = copy_args(args)
        build_library([out]).launch(out.name, (1, 1, 1), (32, 1, 1), got)
        np.testing.assert_array_equal(got["y"], expected["y"], err_msg=f"step {step}, n {size}")


# A block-stride loop run backwards, as a gradient's reverse sweep runs it (``autodiff.sweeps``,
# which keeps these locals named): each thread visits its elements from the last down to its
# first, and the running value makes the order visible.
REVERSED = """
kernel rev(n: i32, x: const f32*, y: f32*) {
  var c_n: i32 = (i32)((i32)threadIdx.x < n ? ((i64)n - (i64)((i32)threadIdx.x) + (i64)((i32)blockDim.x) - 1l) / (i64)((i32)blockDim.x) : 0l)
  var acc: f32 = 0.0f
  for c_r: i32 = 0 to c_n step 1 {
    var c_i: i32 = c_n - 1 - c_r
    var c: i32 = (i32)((i64)((i32)threadIdx.x) + (i64)c_i * (i64)((i32)blockDim.x))
    acc = acc * 0.5f + x[c] + (f32)c_r
    y[c] = acc
  }
}
"""


def test_reversed_block_stride_loops_get_a_uniform_iteration_space_and_keep_each_threads_order() -> None:
    need_compiler()
    gpu = parse_kernel(REVERSED)
    cpu = make_pass("serialize-threads").run(gpu)
    report: list = []
    out = make_pass("normalize-grid-stride", report=report).run(cpu)
    verify_kernel(out)
    assert any("reversed strided loop over 'c'" in d.format() for d in report), [d.format() for d in report]
    assert "c_j" in print_kernel(out)
    for grid, block, size in ((1, 32, 200), (1, 64, 1000), (1, 32, 7), (1, 32, 0), (1, 48, 100)):
        run_both(gpu, out, grid, block, size, seed=size)
    # through the whole CPU pipeline: interchanged with the loop over the threads
    full = to_cpu(gpu)
    assert any(isinstance(x, n.For) and x.var.startswith("c_j") and any(
        isinstance(y, n.For) and y.kind == "threads" for y in walk(x)) for x in walk(full))
    for grid, block, size in ((1, 32, 200), (1, 64, 1000), (1, 32, 7)):
        run_both(gpu, full, grid, block, size, seed=size)


def test_schedule_is_the_same_under_any_string_hash_seed(tmp_path) -> None:
    """The CPU form does not depend on set order: ``sink_thread_loops`` declared the values it
    recomputes in each part (``p_x``, ``p_y``, ``p_z`` of n-body) in the order of a set of names."""
    script = (
        "import pathlib, sys\n"
        "from polypy.driver.pipelines import to_cpu\n"
        "from polypy.driver.source import load\n"
        "from polypy.ir import print_kernel\n"
        "module = load(sys.argv[1])\n"
        "sys.stdout.write(''.join(print_kernel(to_cpu(k)) for k in module.kernels))\n"
    )
    sample = pathlib.Path(__file__).resolve().parent.parent / "samples" / "nbody_step.cu"
    outputs = set()
    for seed in ("1", "2", "7"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-c", script, str(sample)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1


# Two halves of a block do different work, the upper half indexing with `threadIdx.x - 16` (the
# shape of Rodinia lud's perimeter kernel, written anew): the range split gives the upper half a
# loop from min(16, blockDim.x), whose unsigned `tx - 16u` cannot wrap there.
HALVES = r"""
__global__ void halves(const float* a, float* lo, float* hi, int n)
{
    int base = blockIdx.x * 16;
    if (threadIdx.x < 16) {
        lo[base + threadIdx.x] = a[base + threadIdx.x] * 2.0f;
    } else {
        unsigned k = threadIdx.x - 16;
        hi[base + k] = a[base + k] + 1.0f;
    }
}
"""


def test_no_wrap_checks_of_an_upper_split_range_start_at_its_first_thread() -> None:
    def value(e: n.Expr, env: dict) -> int:  # the checks' integer arithmetic, exactly
        if isinstance(e, n.Const):
            return int(e.value)
        if isinstance(e, (n.BlockDim, n.BlockIdx)):
            return env[type(e).__name__]
        if isinstance(e, n.Cast):
            return value(e.x, env)  # the checks only widen
        if isinstance(e, n.Call) and e.fn in ("min", "max"):
            return (min if e.fn == "min" else max)(value(a, env) for a in e.args)
        a, b = value(e.a, env), value(e.b, env)
        ops = {"add": a + b, "sub": a - b, "mul": a * b, "lt": a < b, "le": a <= b, "gt": a > b,
               "ge": a >= b, "eq": a == b, "land": bool(a) and bool(b), "lor": bool(a) or bool(b)}
        return int(ops[e.op])

    kernel = load(None, text=HALVES).kernel("halves")
    cpu = to_cpu(kernel)
    checks = [x.cond for x in walk(cpu) if isinstance(x, n.If) and x.orelse
              and any(isinstance(y, n.For) and y.kind == "threads" for s in x.orelse for y in walk(s))]
    assert checks, "no run-time check around the split loops"
    for cond in checks:  # with blocks of 32 threads every check passes: the split loops run
        assert value(cond, {"BlockDim": 32, "BlockIdx": 3}) == 1, cond
    grid, size = 4, 64
    rng = np.random.default_rng(3)
    args = {"a": rng.random(size, dtype=np.float32), "lo": np.zeros(size, np.float32),
            "hi": np.zeros(size, np.float32), "n": size}
    for block in (32, 24, 8):
        want = copy_args(args)
        emulate(kernel, grid, block, want)
        need_compiler(False)
        got = copy_args(args)
        build_library([cpu]).launch("halves", grid, block, got)
        for name in ("lo", "hi"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{name}, block {block}")
