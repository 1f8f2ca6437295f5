"""The LLVM backend under real parallelism: atomics on global memory from many blocks on several
threads, shared/local scratch (stack, heap, dynamic), module globals, threads=1 vs all cores."""
from __future__ import annotations

import numpy as np
import pytest

from test_llvm_support import compile_cpu, cpu_form, gpu_kernel, isolated_cache, run_both, run_compiled

from polypy.ir.types import SCALAR_TYPES

pytestmark = pytest.mark.usefixtures("isolated_cache")
assert isolated_cache

THREADS = 4  # more workers than this machine may have cores: contention is certain either way
GRID, BLOCK = 500, 64
TOTAL = GRID * BLOCK


def _atomic_kernel(name: str, t: str, stmt: str, extra: str = "") -> str:
    return f"""
kernel {name}(n: i32, x: const {t}*, acc: {t}*, olds: {t}*{extra}) {{
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  if (i < n) {{
    var old: {t} = x[i]
    {stmt}
    olds[i] = old
  }}
}}
"""


def _launch(text: str, args: dict, name: str) -> dict:
    jit = compile_cpu(cpu_form(gpu_kernel(text)))
    run_compiled(jit, name, GRID, BLOCK, args, threads=THREADS)
    return args


@pytest.mark.parametrize("t", ["i32", "u32", "i64", "u64", "f32", "f64"])
def test_atomic_add_returns_every_intermediate_value_once(t):
    dtype = SCALAR_TYPES[t].dtype
    one = "1.0f" if t == "f32" else "1.0" if t == "f64" else {"i32": "1", "u32": "1u", "i64": "1l", "u64": "1ul"}[t]
    args = {"n": TOTAL, "x": np.zeros(TOTAL, dtype), "acc": np.zeros(1, dtype), "olds": np.zeros(TOTAL, dtype)}
    _launch(_atomic_kernel("counter", t, f"old = atomic.add acc[0], {one}"), args, "counter")
    assert args["acc"][0] == TOTAL
    np.testing.assert_array_equal(np.sort(args["olds"]), np.arange(TOTAL, dtype=dtype))


@pytest.mark.parametrize("t", ["i32", "u32", "i64", "u16", "i8"])
def test_integer_atomics_reduce_like_numpy(t):
    dtype = SCALAR_TYPES[t].dtype
    info = np.iinfo(dtype)
    rng = np.random.default_rng(11)
    x = rng.integers(info.min, info.max, TOTAL, dtype=dtype, endpoint=True)
    results = {}
    for op in ("min", "max", "and", "or", "xor", "sub"):
        start = {"min": info.max, "max": info.min, "and": -1, "or": 0, "xor": 0, "sub": 0}[op]
        args = {"n": TOTAL, "x": x, "acc": np.array([start]).astype(dtype), "olds": np.zeros(TOTAL, dtype)}
        _launch(_atomic_kernel("op", t, f"old = atomic.{op} acc[0], x[i]"), args, "op")
        results[op] = args["acc"][0]
    assert results["min"] == x.min() and results["max"] == x.max()
    assert results["and"] == np.bitwise_and.reduce(x) and results["or"] == np.bitwise_or.reduce(x)
    assert results["xor"] == np.bitwise_xor.reduce(x)
    with np.errstate(over="ignore"):
        assert results["sub"] == np.subtract.reduce(np.concatenate([[dtype.type(0)], x]))


@pytest.mark.parametrize("t", ["u32", "i32", "u64"])
def test_atomic_inc_dec_wrap_like_cuda(t):
    limit = 37
    lit = {"u32": f"{limit}u", "i32": f"{limit}", "u64": f"{limit}ul"}[t]
    dtype = SCALAR_TYPES[t].dtype
    for op, expected in (("inc", TOTAL % (limit + 1)), ("dec", (-TOTAL) % (limit + 1))):
        args = {"n": TOTAL, "x": np.zeros(TOTAL, dtype), "acc": np.zeros(1, dtype), "olds": np.zeros(TOTAL, dtype)}
        _launch(_atomic_kernel("wrap", t, f"old = atomic.{op} acc[0], {lit}"), args, "wrap")
        assert args["acc"][0] == expected, op
        assert np.all(args["olds"] <= limit)


def test_atomic_cas_has_one_winner_per_slot():
    slots = 13
    text = """
        kernel cas(n: i32, slot: u32*, olds: u32*) {
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {
            var old: u32 = 0u
            old = atomic.cas slot[i % 13], 0u, (u32)i + 1u
            olds[i] = old
          }
        }
    """
    args = {"n": TOTAL, "slot": np.zeros(slots, np.uint32), "olds": np.zeros(TOTAL, np.uint32)}
    _launch(text, args, "cas")
    winners = np.flatnonzero(args["olds"] == 0)
    assert len(winners) == slots
    np.testing.assert_array_equal(np.sort(args["slot"]), np.sort(winners + 1))
    assert np.all(args["olds"][args["olds"] != 0] == args["slot"][(args["olds"][args["olds"] != 0] - 1) % slots])


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_float_atomic_min_max_and_exchange(t):
    dtype = SCALAR_TYPES[t].dtype
    x = np.random.default_rng(12).standard_normal(TOTAL).astype(dtype)
    for op, start, want in (("min", np.inf, x.min()), ("max", -np.inf, x.max())):
        args = {"n": TOTAL, "x": x, "acc": np.array([start], dtype), "olds": np.zeros(TOTAL, dtype)}
        _launch(_atomic_kernel("fmm", t, f"old = atomic.{op} acc[0], x[i]"), args, "fmm")
        assert args["acc"][0] == want, op
    args = {"n": TOTAL, "x": x, "acc": np.array([7.0], dtype), "olds": np.zeros(TOTAL, dtype)}
    _launch(_atomic_kernel("xchg", t, "old = atomic.exch acc[0], x[i]"), args, "xchg")
    # every value went in once and came out once (as an old value or as the final contents)
    np.testing.assert_array_equal(np.sort(np.concatenate([args["olds"], args["acc"]])),
                                  np.sort(np.concatenate([x, [7.0]]).astype(dtype)))


def test_float_atomic_add_of_exact_values_is_exact():
    x = np.random.default_rng(13).integers(-50, 50, TOTAL).astype(np.float32)
    args = {"n": TOTAL, "x": x, "acc": np.zeros(3, np.float32), "olds": np.zeros(TOTAL, np.float32)}
    _launch(_atomic_kernel("fadd", "f32", "old = atomic.add acc[i % 3], x[i]"), args, "fadd")
    np.testing.assert_array_equal(args["acc"], [x[j::3].sum() for j in range(3)])


# --------------------------------------------------------------------------- scratch memory in CPU form

REDUCE = """
kernel reduce(n: i32, x: const f32*, out: f32*) stage cpu {
  shared s: f32[256]
  for threads tx: u32 = 0u to blockDim.x step 1u {
    var i: i32 = (i32)(blockIdx.x * blockDim.x + tx)
    s[tx] = i < n ? x[i] : 0.0f
  }
  var stride: u32 = blockDim.x / 2u
  while (stride > 0u) {
    for threads tx_1: u32 = 0u to blockDim.x step 1u {
      if (tx_1 < stride) {
        s[tx_1] = s[tx_1] + s[tx_1 + stride]
      }
    }
  } update {
    stride = stride >> 1u
  }
  for threads tx_2: u32 = 0u to blockDim.x step 1u {
    if (tx_2 == 0u) {
      atomic.add out[0], s[0]
    }
  }
}

kernel reduce_dynamic(n: i32, x: const f32*, out: f32*) stage cpu {
  extern shared s: f32[]
  local v: f32[blockDim.z][blockDim.y][blockDim.x]
  shared big: i32[40000]
  for threads tx: u32 = 0u to blockDim.x step 1u {
    var i: i32 = (i32)(blockIdx.x * blockDim.x + tx)
    v[0u][0u][tx] = i < n ? x[i] : 0.0f
    big[39999u - tx] = (i32)tx
  }
  for threads tx_1: u32 = 0u to blockDim.x step 1u {
    s[tx_1] = v[0u][0u][tx_1] * (f32)(big[39999u - tx_1] - (i32)tx_1 + 1)
  }
  var stride: u32 = blockDim.x / 2u
  while (stride > 0u) {
    for threads tx_2: u32 = 0u to blockDim.x step 1u {
      if (tx_2 < stride) {
        s[tx_2] = s[tx_2] + s[tx_2 + stride]
      }
    }
  } update {
    stride = stride >> 1u
  }
  atomic.add out[0], s[0]
}
"""


@pytest.mark.parametrize("kernel", ["reduce", "reduce_dynamic"])
@pytest.mark.parametrize("block", [256, 64, 1])
def test_two_phase_shared_memory_reduction(kernel, block):
    jit = compile_cpu(REDUCE)
    n = 100_000
    x = np.random.default_rng(14).integers(0, 10, n).astype(np.float32)  # exact sums in any order
    out = np.zeros(1, np.float32)
    grid = -(-n // block)
    run_compiled(jit, kernel, grid, block, {"n": n, "x": x, "out": out}, shmem=4 * block, threads=THREADS)
    assert out[0] == x.sum()


def test_module_globals_constant_initializer_and_device_state_across_launches():
    jit = compile_cpu("""
        constant taps: f32[4] = {1.0f, 2.0f, 3.0f, 4.0f}
        device counter: u32[1]

        kernel weigh(n: i32, x: const f32*, y: f32*) stage cpu {
          constant taps: f32[4]
          device counter: u32[1]
          for threads tx: u32 = 0u to blockDim.x step 1u {
            var i: i32 = (i32)(blockIdx.x * blockDim.x + tx)
            if (i < n) {
              y[i] = taps[i % 4] * x[i]
              atomic.add counter[0], 1u
            }
          }
        }

        kernel read_counter(out: u32*) stage cpu {
          device counter: u32[1]
          out[0] = counter[0]
        }
    """)
    np.testing.assert_array_equal(jit.globals["taps"], [1, 2, 3, 4])
    x = np.ones(1000, np.float32)
    y = np.zeros(1000, np.float32)
    run_compiled(jit, "weigh", 16, 64, {"n": 1000, "x": x, "y": y}, threads=THREADS)
    run_compiled(jit, "weigh", 16, 64, {"n": 1000, "x": x, "y": y}, threads=THREADS)
    np.testing.assert_array_equal(y, np.tile([1, 2, 3, 4], 250))
    out = np.zeros(1, np.uint32)
    run_compiled(jit, "read_counter", 1, 1, {"out": out})
    assert out[0] == 2000 == jit.globals["counter"][0]
    jit.globals["taps"][:] = 0.5  # the host sets constant memory (cudaMemcpyToSymbol)
    run_compiled(jit, "weigh", 16, 64, {"n": 1000, "x": x, "y": y})
    assert np.all(y == 0.5)


def test_one_thread_and_all_threads_agree():
    k = gpu_kernel("""
        kernel stencil(n: i32, x: const f64*, y: f64*) {
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i > 0 && i < n - 1) {
            y[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * x[i + 1] + sin(x[i])
          }
        }
    """)
    x = np.random.default_rng(15).standard_normal(50_000)
    jit = compile_cpu(cpu_form(k))
    results = []
    for threads in (1, None, THREADS):
        y = np.zeros_like(x)
        run_compiled(jit, "stencil", 391, 128, {"n": len(x), "x": x, "y": y}, threads=threads)
        results.append(y)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])
    emulated, _ = run_both(k, 391, 128, {"n": len(x), "x": x, "y": np.zeros_like(x)}, jit=jit)
    np.testing.assert_allclose(results[0], emulated["y"], rtol=1e-15, atol=1e-15)


def test_extern_shared_arrays_share_one_allocation():
    """Every ``extern __shared__`` array starts at the same address, whatever its element type."""
    jit = compile_cpu("""
        kernel views(out: u32*) stage cpu {
          extern shared f: f32[]
          extern shared u: u32[]
          for threads tx: u32 = 0u to blockDim.x step 1u {
            f[tx] = (f32)tx + 0.5f
          }
          for threads tx_1: u32 = 0u to blockDim.x step 1u {
            out[blockIdx.x * blockDim.x + tx_1] = u[tx_1]
          }
        }
    """)
    out = np.zeros(8 * 32, np.uint32)
    run_compiled(jit, "views", 8, 32, {"out": out}, shmem=32 * 4, threads=THREADS)
    np.testing.assert_array_equal(out, np.tile(np.arange(32, dtype=np.float32) + 0.5, 8).view(np.uint32))
