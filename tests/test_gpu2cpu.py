"""The GPU -> CPU lowering: CPU-form invariants on every sample, decisions, expected errors, and
tricky control flow (checked against the emulator through the C backend)."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import assert_same_as_emulator, gpu_kernel
from gpu2cpu.lower_block_atomics import lower_block_atomics
from gpu2cpu.serialize_threads import serialize_threads
from gpu2cpu.thread_affine import counter_dim
from polypy.driver.pipelines import to_cpu
from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.types import U32
from polypy.ir.visitor import walk
from samples.spec import all_samples

SAMPLES = all_samples()


def _thread_nests(kernel: n.Kernel) -> list[n.For]:
    return [x for x in walk(kernel) if isinstance(x, n.For) and x.kind == "threads" and x.var.startswith("tz")]


def check_cpu_form(kernel: n.Kernel, *, scheduled: bool = False) -> None:
    """The CPU-form contract of docs/ir.md, beyond what the verifier checks.

    ``scheduled``: after the schedule passes (``to_cpu(optimize=True)``), thread loops may have
    other block-uniform bounds, be split, and contain serial loops between their levels.
    """
    assert kernel.stage == "cpu"
    for x in walk(kernel):
        assert not isinstance(x, (n.ThreadIdx, n.Barrier, n.Shuffle, n.Vote, n.Return)), x
        if isinstance(x, n.AtomicRMW):
            assert kernel.space(x.buffer) in ("global", "device"), x
    for b in kernel.buffers:
        if b.space in ("shared", "local") and b.shape is not None:
            for d in b.shape:
                assert all(isinstance(y, (n.Const, n.BlockDim, n.Binary)) for y in walk(d)), b
    if scheduled:
        _check_scheduled_thread_loops(kernel.body, 3)
        return
    for nest in _thread_nests(kernel):
        # tz outermost, tx innermost, u32 counters from 0 to blockDim, one loop inside the other
        (ty,) = nest.body
        (tx,) = ty.body
        for loop, dim in ((nest, 2), (ty, 1), (tx, 0)):
            assert loop.kind == "threads" and loop.vtype == U32
            assert loop.start == n.Const(0, U32) and loop.step == n.Const(1, U32) and loop.stop == n.BlockDim(dim)
        inner = [x for s in tx.body for x in walk(s)]
        assert not any(isinstance(x, n.For) and x.kind == "threads" for x in inner), "nested thread loops"
        _no_escaping_jumps(tx.body)


def _check_scheduled_thread_loops(stmts: tuple[n.Stmt, ...], outer_dim: int) -> None:
    """Thread loops: u32 counters tx/ty/tz(_N), step 1u; inside a loop over dimension d only
    loops over lower dimensions; no jump leaves a thread loop."""
    for s in stmts:
        if isinstance(s, n.For) and s.kind == "threads":
            dim = counter_dim(s.var)
            assert dim is not None and dim < outer_dim, s.var
            assert s.vtype == U32 and s.step == n.Const(1, U32)
            _no_escaping_jumps(s.body)
            _check_scheduled_thread_loops(s.body, dim)
        elif isinstance(s, n.If):
            _check_scheduled_thread_loops(s.then, outer_dim)
            _check_scheduled_thread_loops(s.orelse, outer_dim)
        elif isinstance(s, n.For):
            _check_scheduled_thread_loops(s.body, outer_dim)
        elif isinstance(s, n.While):
            _check_scheduled_thread_loops(s.body + s.update, outer_dim)


def _no_escaping_jumps(stmts: tuple[n.Stmt, ...]) -> None:
    for s in stmts:
        assert not isinstance(s, (n.Break, n.Continue)), "a jump leaves the thread loop"
        if isinstance(s, n.If):
            _no_escaping_jumps(s.then)
            _no_escaping_jumps(s.orelse)


@pytest.mark.parametrize("s", SAMPLES, ids=[s.name for s in SAMPLES])
def test_samples_lower_to_the_cpu_form(s) -> None:
    module = polypy.load(s.source, defines=s.defines)
    for k in module.kernels:
        for optimize in (True, False):
            check_cpu_form(to_cpu(k, optimize=optimize), scheduled=optimize)


def _report(kernel: n.Kernel, **options) -> list[str]:
    report: list = []
    serialize_threads(kernel, report=report, **options)
    return [d.format() for d in report]


def test_values_not_live_across_the_barrier_get_no_buffer() -> None:
    """transpose_tiled reassigns x and y after the barrier: plain locals in each thread loop."""
    kernel = polypy.load(next(s for s in SAMPLES if s.name == "transpose_tiled").source).kernel("transpose_tiled")
    cpu = serialize_threads(kernel)
    assert [b.name for b in cpu.buffers if b.space == "local"] == []
    assert len(_thread_nests(cpu)) == 2


def test_block_uniform_values_are_computed_once_per_block() -> None:
    kernel = polypy.load(next(s for s in SAMPLES if s.name == "layernorm").source).kernel("layernorm")
    lines = _report(kernel)
    assert any("'mean' is block-uniform: computed once per block" in x for x in lines)
    assert any("'inv_std' is block-uniform" in x for x in lines)
    cpu = serialize_threads(kernel)
    assert not [b for b in cpu.buffers if b.space == "local"]  # no per-thread value survives a barrier
    assert any(isinstance(s, n.Decl) and s.name == "mean" for s in cpu.body)  # at block level


def test_recomputation_can_be_turned_off() -> None:
    text = """kernel k(x: f32*) {
      shared s: f32[64]
      var w: f32 = (f32)threadIdx.x * 0.5f
      s[threadIdx.x] = x[threadIdx.x]
      barrier
      x[threadIdx.x] = s[63u - threadIdx.x] + w
    }"""
    kernel = gpu_kernel(text)
    assert any("'w' is live across thread loops: recomputed in 1 thread loop(s)" in x for x in _report(kernel))
    assert any("'w' is live across thread loops: kept in per-thread buffer w_buf" in x
               for x in _report(kernel, recompute=False))
    args = {"x": np.arange(64, dtype=np.float32)}
    assert_same_as_emulator(kernel, 1, 64, args)


def test_recomputation_never_repeats_loads_or_changing_values() -> None:
    text = """kernel k(x: f32*, n: i32) {
      shared s: f32[64]
      var a: f32 = x[threadIdx.x]
      var b: f32 = (f32)n
      var c: i32 = n
      c = c + 1
      var d: f32 = (f32)c
      s[threadIdx.x] = a
      barrier
      x[threadIdx.x] = s[63u - threadIdx.x] + a + b + d
    }"""
    lines = _report(gpu_kernel(text), recompute=True)
    assert any("'a' is live across thread loops: kept in per-thread buffer" in x for x in lines)  # a load
    assert not any("'d'" in x and "recomputed" in x for x in lines)  # reads c, which changes
    assert_same_as_emulator(gpu_kernel(text), 1, 64, {"x": np.arange(64, dtype=np.float32), "n": 5})


def test_thread_loops_are_counted_in_the_report() -> None:
    kernel = polypy.load(next(s for s in SAMPLES if s.name == "reduce_sum").source).kernel("reduce_sum")
    assert any(x.endswith("reduce_sum: 3 thread loop(s) over the threads of a block") for x in _report(kernel))


def test_warp_reduce_is_predicated_per_thread() -> None:
    kernel = polypy.load(next(s for s in SAMPLES if s.name == "warp_reduce").source).kernel("warp_reduce")
    lines = _report(kernel)
    assert any("warp_reduce.cu:28:5: warp_reduce: warp operations under a thread-dependent condition: predicated "
               "per thread (mask active)" in x for x in lines)
    assert any("shuffle: values exchanged through per-thread buffer" in x for x in lines)


def test_nested_predication_and_votes_under_a_mask() -> None:
    kernel = gpu_kernel("""kernel k(x: i32*, out: u32*) {
      var v: i32 = x[threadIdx.x]
      var w: u32 = threadIdx.x / 32u
      if (w != 1u) {
        var m: u32
        m = vote.ballot(4294967295u, v > 0)
        if (w == 2u) {
          var t: i32
          t = shfl.up(4294967295u, v, 1u, 8)
          v = v * 10 + t
        } else {
          var a: u32
          a = vote.activemask(4294967295u, true)
          v = v + (i32)a
        }
        out[threadIdx.x] = m
      }
      x[threadIdx.x] = v
    }""")
    rng = np.random.default_rng(4)
    args = {"x": rng.integers(-3, 4, 128).astype(np.int32), "out": np.zeros(128, np.uint32)}
    assert_same_as_emulator(kernel, 1, 128, args)


def test_scalar_parameters_assigned_in_the_kernel_are_per_thread() -> None:
    kernel = gpu_kernel("""kernel k(n: i32, x: i32*) {
      shared s: i32[32]
      if (threadIdx.x % 2u == 0u) {
        n = n + 1
      }
      s[threadIdx.x] = n
      barrier
      x[threadIdx.x] = s[31u - threadIdx.x] + n
    }""")
    assert_same_as_emulator(kernel, 1, 32, {"n": 5, "x": np.zeros(32, np.int32)})


def test_barrier_loops_with_while_continue_and_update() -> None:
    kernel = gpu_kernel("""kernel k(x: i32*) {
      shared s: i32[64]
      var k: i32 = 0
      var acc: i32 = x[threadIdx.x]
      while (k < 6) {
        s[threadIdx.x] = acc
        barrier
        if (k % 3 == 1) {
          barrier
          continue
        }
        acc = acc + s[(threadIdx.x + 3u) % 64u]
        barrier
      } update {
        k = k + 1
      }
      x[threadIdx.x] = acc
    }""")
    assert_same_as_emulator(kernel, 1, 64, {"x": np.arange(64, dtype=np.int32)})


def test_warp_operation_in_a_thread_dependent_loop_is_refused() -> None:
    kernel = gpu_kernel("""kernel k(x: f32*, n: i32) {
      var v: f32 = x[threadIdx.x]
      for i: i32 = (i32)threadIdx.x to n step 32 {
        var t: f32
        t = shfl.down(4294967295u, v, 1u, 32)
        v = v + t
      }
      x[threadIdx.x] = v
    }""")
    with pytest.raises(UserError, match=r"<ir>:3:7: error: warp operation inside a loop whose trip count depends"):
        serialize_threads(kernel)


def test_thread_dependent_break_in_a_warp_loop_is_refused() -> None:
    """Some threads leaving the loop early make its trip count thread-dependent."""
    kernel = gpu_kernel("""kernel k(x: f32*) {
      var v: f32 = x[threadIdx.x]
      var o: i32 = 16
      while (o > 0) {
        var t: f32
        t = shfl.xor(4294967295u, v, (u32)o, 32)
        v = v + t
        if (v > 100.0f) {
          break
        }
      } update {
        o = o >> 1
      }
      x[threadIdx.x] = v
    }""")
    with pytest.raises(UserError, match=r"<ir>:4:7: error: warp operation inside a loop whose trip count depends"):
        serialize_threads(kernel)


def test_stage_checks() -> None:
    cpu = to_cpu(gpu_kernel("kernel k(x: f32*) {\n  x[threadIdx.x] = 1.0f\n}"))
    with pytest.raises(InternalError, match="expects a GPU-form kernel"):
        serialize_threads(cpu)
    with pytest.raises(InternalError, match="expects a CPU-form kernel"):
        lower_block_atomics(gpu_kernel("kernel k(x: f32*) {\n  x[threadIdx.x] = 1.0f\n}"))


def test_min_cut_stores_the_fewest_values() -> None:
    from gpu2cpu.store_or_recompute import choose_stored

    assert choose_stored({"b", "c"}, {"a": None, "b": ("a",), "c": ("a",)}) == {"a"}
    assert choose_stored({"b"}, {"a": None, "b": ("a",)}) == {"b"}  # a tie: store the value itself
    assert choose_stored({"b"}, {"b": ()}) == set()  # a function of the thread index alone
    assert choose_stored({"c"}, {"a": None, "b": None, "c": ("a", "b")}) == {"c"}
    assert choose_stored({"d", "e", "f"}, {"a": None, "b": None, "d": ("a", "b"), "e": ("a", "b"),
                                           "f": ("a",)}) == {"a", "b"}
    assert choose_stored({"x"}, {}) == {"x"}  # unknown: cannot be recomputed


def test_min_cut_recomputes_from_a_stored_operand() -> None:
    kernel = gpu_kernel("""kernel k(x: f32*, y: f32*) {
      shared s: f32[64]
      var a: f32 = x[threadIdx.x]
      var b: f32 = a * 2.0f
      var c: f32 = a + (f32)threadIdx.x
      s[threadIdx.x] = a
      barrier
      y[threadIdx.x] = s[63u - threadIdx.x] + b * c
    }""")
    lines = _report(kernel)
    assert any("'a' is kept in per-thread buffer a_buf[blockDim.z][blockDim.y][blockDim.x], to recompute 'b', 'c' "
               "from it" in x for x in lines)
    cpu = serialize_threads(kernel)
    assert [b.name for b in cpu.buffers if b.space == "local"] == ["a_buf"]
    assert_same_as_emulator(kernel, 1, 64, {"x": np.arange(64, dtype=np.float32), "y": np.zeros(64, np.float32)})


def test_barriers_under_thread_dependent_control_are_refused() -> None:
    """The frontend refuses them first; IR written by hand gets the same diagnostic here."""
    in_if = gpu_kernel("kernel k(x: f32*) {\n  if (threadIdx.x < 5u) {\n    barrier\n  }\n  x[0] = 1.0f\n}")
    with pytest.raises(UserError, match=r"<ir>:3:5: error: __syncthreads\(\) under thread-dependent control"):
        serialize_threads(in_if)
    in_loop = gpu_kernel("kernel k(x: f32*) {\n  for i: u32 = threadIdx.x to 8u step 1u {\n    barrier\n  }\n}")
    with pytest.raises(UserError, match=r"<ir>:2:3: error: __syncthreads\(\) under thread-dependent control"):
        serialize_threads(in_loop)
