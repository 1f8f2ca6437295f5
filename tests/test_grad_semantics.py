"""Gradient kernels on small hand-written kernels: the shadow calling convention, each
accumulation strategy, caching vs recomputation, barriers, shared memory, warp shuffles,
atomics, loops of every shape, and what ``grad`` refuses (with a location)."""
from __future__ import annotations

import numpy as np
import pytest

from autodiff import Accumulation, Caching
from autodiff.check import check_gradients, shadow_pairs
from polypy.emulator import emulate
from polypy.errors import UserError
from polypy.driver.gradients import grad_kernel
from polypy.ir import nodes as n
from polypy.ir import parse_kernel
from polypy.ir.visitor import walk
from polypy.passes import SIMPLIFY, run_pipeline

GID = "(i32)(blockIdx.x * blockDim.x + threadIdx.x)"
TID = "(i32)threadIdx.x"


def module_of(text: str) -> n.Module:
    return n.Module((run_pipeline(parse_kernel(text), SIMPLIFY),))


def grad(text: str, **options):
    module = module_of(text)
    name = module.kernels[0].name
    report: list = []
    g = grad_kernel(module, name, report=report, **options)
    return module.kernels[0], g, report


def check(text: str, grid, block, args, *, shmem: int = 0, **options):
    module = module_of(text)
    name = module.kernels[0].name
    g = grad_kernel(module, name, **options)
    f = grad_kernel(module, name, mode="forward", **{k: v for k, v in options.items() if k in ("wrt", "const")})
    result = check_gradients(module.kernels[0], g, grid, block, args, k_fwd=f, shmem=shmem,
                             grad_shmem=shmem * 2 if shmem else 0)
    assert abs(result.finite_difference) > 1e-8
    assert result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result
    return g


def strategies(report, buffer: str) -> set[str]:
    return {d.strategy for d in report if isinstance(d, Accumulation) and d.buffer == buffer}


def caching(report) -> set[str]:
    return {d.strategy for d in report if isinstance(d, Caching)}


# ----------------------------------------------------------------------------- calling convention

SEMANTICS = f"""kernel sem(x: const f64*, y: f64*, acc: f64*, io: f64*, n: i32) {{
  if ({GID} < n) {{
    y[{GID}] = 3.0 * x[{GID}]
    atomic.add acc[0], x[{GID}]
    io[{GID}] = io[{GID}] * x[{GID}]
  }}
}}
"""


def test_shadow_semantics_read_only_overwritten_incremented_in_out() -> None:
    k, g, report = grad(SEMANTICS)
    assert [p.name for p in g.params] == ["x", "d_x", "y", "d_y", "acc", "d_acc", "io", "d_io", "n"]
    rng = np.random.default_rng(0)
    size, n_ = 70, 60
    x, io = rng.standard_normal(size), rng.standard_normal(size)
    dx0, sy, sa, sio = (rng.standard_normal(size), rng.standard_normal(size), rng.standard_normal(1),
                        rng.standard_normal(size))
    args = {"x": x.copy(), "d_x": dx0.copy(), "y": np.zeros(size), "d_y": sy.copy(), "acc": np.zeros(1),
            "d_acc": sa.copy(), "io": io.copy(), "d_io": sio.copy(), "n": n_}
    emulate(g, 2, 32, args)
    live = np.arange(size) < n_
    # read-only input: its gradient is added to what the shadow held
    np.testing.assert_allclose(args["d_x"], dx0 + np.where(live, 3 * sy + sa[0] + sio * io, 0.0), rtol=1e-14)
    # overwritten: the seed is consumed (only where K wrote)
    np.testing.assert_array_equal(args["d_y"], np.where(live, 0.0, sy))
    # incremented by atomicAdd: the seed stays
    np.testing.assert_array_equal(args["d_acc"], sa)
    # in/out: gradient with respect to the initial contents
    np.testing.assert_allclose(args["d_io"], np.where(live, sio * x, sio), rtol=1e-14)
    # and K's forward effect
    np.testing.assert_allclose(args["y"], np.where(live, 3 * x, 0.0))
    np.testing.assert_allclose(args["acc"], [x[:n_].sum()])
    np.testing.assert_allclose(args["io"], np.where(live, io * x, io))
    assert strategies(report, "x") == {"plain"}
    assert strategies(report, "io") == {"plain"}


def test_wrt_and_const_choose_the_shadows() -> None:
    text = f"""kernel saxpy(n: i32, a: f32, x: const f32*, y: f32*) {{
  if ({GID} < n) {{
    y[{GID}] = a * x[{GID}] + y[{GID}]
  }}
}}
"""
    module = module_of(text)
    names = lambda g: [p.name for p in g.params]  # noqa: E731
    full = grad_kernel(module, "saxpy")
    assert names(full) == ["n", "a", "d_a", "x", "d_x", "y", "d_y"]
    assert str(full.param("d_a").ptype) == "f32*"  # an active scalar's adjoint: one element
    assert names(grad_kernel(module, "saxpy", wrt=["x"])) == ["n", "a", "x", "d_x", "y", "d_y"]  # y is written
    assert names(grad_kernel(module, "saxpy", const=["a", "x"])) == ["n", "a", "x", "y", "d_y"]
    fwd = grad_kernel(module, "saxpy", mode="forward")
    assert fwd.name == "saxpy_fwd" and names(fwd) == names(full)
    assert str(fwd.param("d_a").ptype) == "f32"  # a tangent scalar is passed by value
    with pytest.raises(UserError, match="not a floating-point parameter"):
        grad_kernel(module, "saxpy", wrt=["n"])
    with pytest.raises(UserError, match="no parameter named 'z'"):
        grad_kernel(module, "saxpy", wrt=["z"])
    with pytest.raises(UserError, match="both in --wrt and in --const"):
        grad_kernel(module, "saxpy", wrt=["x"], const=["x"])
    with pytest.raises(UserError, match="no kernel named"):
        grad_kernel(module, "nope")


def test_scalar_parameter_adjoint_is_a_block_reduction() -> None:
    text = f"""kernel scale(n: i32, a: f64, x: const f64*, y: f64*) {{
  if ({GID} < n) {{
    y[{GID}] = a * a * x[{GID}]
  }}
}}
"""
    rng = np.random.default_rng(1)
    g = check(text, 3, 64, {"n": 150, "a": 1.7, "x": rng.standard_normal(192), "y": np.zeros(192)})
    _, _, report = grad(text)
    assert strategies(report, "a") == {"block-reduction"}
    atomics = [s for s in walk(g) if isinstance(s, n.AtomicRMW) and s.buffer == "d_a"]
    assert len(atomics) == 1  # one atomic per block, after the reduction


# ----------------------------------------------------------------------------- accumulation strategies

STENCIL = f"""kernel stencil(n: i32, x: const f64*, out: f64*) {{
  if ({GID} >= 1 && {GID} < n - 1) {{
    out[{GID}] = x[{GID} - 1] - 2.0 * x[{GID}] * x[{GID}] + x[{GID} + 1]
  }}
}}
"""


def test_neighbour_stencil_read_race_becomes_atomic_accumulation() -> None:
    # Without block windows (``test_grad_windows``): one global atomic per contribution.
    k, g, report = grad(STENCIL, windows=False)
    assert strategies(report, "x") == {"atomic"}
    reasons = {d.reason for d in report if isinstance(d, Accumulation) and d.buffer == "x"}
    assert any("isl" in r for r in reasons)
    assert any(isinstance(s, n.AtomicRMW) and s.buffer == "d_x" for s in walk(g))
    rng = np.random.default_rng(2)
    check(STENCIL, 4, 32, {"n": 120, "x": rng.standard_normal(128), "out": np.zeros(128)}, windows=False)


def test_private_elements_get_plain_accumulation_and_can_be_switched_off() -> None:
    _, g, report = grad(SEMANTICS)
    assert strategies(report, "x") == {"plain"}
    assert not any(isinstance(s, n.AtomicRMW) and s.buffer == "d_x" for s in walk(g))
    _, g2, report2 = grad(SEMANTICS, privacy=False, windows=False)
    assert strategies(report2, "x") == {"atomic"}
    # Without the per-thread proof, the per-block one still holds: a block window, flushed with plain adds.
    _, _, report3 = grad(SEMANTICS, privacy=False)
    assert strategies(report3, "x") == {"window"}


def test_block_uniform_read_of_a_read_only_buffer_is_reduced_per_block() -> None:
    text = f"""kernel shift(n: i32, x: const f64*, y: f64*) {{
  if ({GID} < n) {{
    y[{GID}] = x[{GID}] * x[(i32)blockIdx.x]
  }}
}}
"""
    _, g, report = grad(text)
    assert "block-reduction" in strategies(report, "x")
    rng = np.random.default_rng(3)
    check(text, 3, 32, {"n": 90, "x": rng.standard_normal(96), "y": np.zeros(96)})
    _, _, report2 = grad(text, block_reductions=False)
    assert "block-reduction" not in strategies(report2, "x")


# ----------------------------------------------------------------------------- caching and loops

def _iterate(stop: str) -> str:
    return f"""kernel iterate(n: i32, steps: i32, x: const f64*, y: f64*) {{
  if ({GID} < n) {{
    var v: f64 = x[{GID}]
    for k: i32 = 0 to {stop} step 1 {{
      v = sin(v) * 0.9 + v * v * 0.1
    }}
    y[{GID}] = v
  }}
}}
"""


def _iterate_args(seed: int = 4):
    rng = np.random.default_rng(seed)
    return {"n": 50, "steps": 6, "x": rng.uniform(-1, 1, 64), "y": np.zeros(64)}


def test_state_overwritten_in_a_counted_loop_is_taped() -> None:
    _, g, report = grad(_iterate("8"))
    tapes = [b for b in g.buffers if b.space == "local"]
    assert len(tapes) == 1 and tapes[0].shape == (n.Const(8, tapes[0].shape[0].type),)
    assert "tape" in caching(report)
    check(_iterate("8"), 2, 32, _iterate_args())


def test_state_overwritten_in_a_loop_of_unknown_length_is_taped_at_launch_not_replayed() -> None:
    # replaying from the loop entry is quadratic in the trip count: by default a tape sized at
    # launch holds the carried state instead (issue 38 item 3), and the report says why
    _, g, report = grad(_iterate("steps"))
    tapes = [b for b in g.buffers if b.space == "local"]
    assert tapes and any(not isinstance(d, n.Const) for b in tapes for d in b.shape)
    assert "replay-loop" not in caching(report) and "tape" in caching(report)
    assert any("instead of replaying the loop" in d.detail for d in report if isinstance(d, Caching))
    check(_iterate("steps"), 2, 32, _iterate_args())
    # without tapes sized at launch: recomputed from the loop entry in each reversed iteration
    _, g, report = grad(_iterate("steps"), runtime_tapes=False)
    assert not [b for b in g.buffers if b.space == "local"]
    assert "replay-loop" in caching(report)
    check(_iterate("steps"), 2, 32, _iterate_args(), runtime_tapes=False)


def test_caching_strategies_are_switchable() -> None:
    def kernel(init: str) -> str:
        return f"""kernel f(n: i32, x: const f64*, y: f64*) {{
  if ({GID} < n) {{
    var b: f64 = {init}
    y[{GID}] = b * b
    b = 0.5
    y[{GID}] = y[{GID}] + b
  }}
}}
"""
    cheap, costly = kernel(f"x[{GID}] * 2.0"), kernel(f"exp(x[{GID}])")
    args = {"n": 30, "x": np.random.default_rng(5).uniform(-0.3, 0.3, 32), "y": np.zeros(32)}
    # auto: recompute what is cheap, store what is not
    assert caching(grad(cheap)[2]) == {"recompute"}
    assert caching(grad(costly)[2]) == {"tape"}
    # store: everything overwritten is stored; recompute: everything recomputable is recomputed
    assert caching(grad(cheap, cache="store")[2]) == {"tape"}
    assert caching(grad(costly, cache="recompute")[2]) == {"recompute"}
    for text in (cheap, costly):
        for cache in ("auto", "recompute", "store"):
            check(text, 1, 32, args, cache=cache)


def test_while_loop_with_recorded_iteration_count() -> None:
    text = f"""kernel grow(n: i32, x: const f64*, y: f64*) {{
  if ({GID} < n) {{
    var v: f64 = x[{GID}]
    while (v < 10.0) {{
      v = sqrt(v) + v
    }}
    y[{GID}] = v
  }}
}}
"""
    _, g, report = grad(text)
    assert "replay-loop" in caching(report)
    args = {"n": 40, "x": np.random.default_rng(6).uniform(0.5, 3.0, 48), "y": np.zeros(48)}
    check(text, 2, 32, args)


def test_break_and_continue() -> None:
    text = f"""kernel steps(n: i32, x: const f64*, y: f64*) {{
  if ({GID} < n) {{
    var v: f64 = x[{GID}]
    var s: f64 = 0.0
    for k: i32 = 0 to 12 step 1 {{
      if (k % 3 == 1) {{
        continue
      }}
      if (v > 6.0) {{
        break
      }}
      v = v * 1.5 + 0.25
      s = s + v * v
    }}
    y[{GID}] = s
  }}
}}
"""
    args = {"n": 40, "x": np.random.default_rng(7).uniform(0.1, 2.0, 48), "y": np.zeros(48)}
    check(text, 2, 32, args)


def test_local_array_gets_a_local_shadow() -> None:
    text = f"""kernel poly(n: i32, x: const f64*, y: f64*) {{
  local t: f64[4]
  if ({GID} < n) {{
    for k: i32 = 0 to 4 step 1 {{
      t[k] = x[{GID}] * (f64)(k + 1)
    }}
    var s: f64 = 0.0
    for k2: i32 = 0 to 4 step 1 {{
      s = s + t[k2] * t[3 - k2]
    }}
    y[{GID}] = s
  }}
}}
"""
    _, g, report = grad(text)
    assert any(b.space == "local" and b.name == "d_t" for b in g.buffers)
    assert strategies(report, "t") == {"plain"}
    check(text, 1, 32, {"n": 30, "x": np.random.default_rng(8).standard_normal(32), "y": np.zeros(32)})


# ----------------------------------------------------------------------------- barriers and shared memory

TREE = f"""kernel tree(x: const f64*, out: f64*) {{
  shared s: f64[64]
  s[{TID}] = x[{GID}] * x[{GID}]
  barrier
  var stride: i32 = (i32)(blockDim.x / 2u)
  while (stride > 0) {{
    if ({TID} < stride) {{
      s[{TID}] = fmax(s[{TID}], 0.5 * s[{TID} + stride]) + s[{TID} + stride]
    }}
    barrier
    stride = stride >> 1
  }}
  if ({TID} == 0) {{
    out[(i32)blockIdx.x] = s[0]
  }}
}}
"""


def test_shared_memory_tree_reduction_with_barriers() -> None:
    k, g, report = grad(TREE)
    shadows = [b for b in g.buffers if b.space == "shared" and b.name == "d_s"]
    assert len(shadows) == 1
    # the shadow is zeroed at kernel start, then a barrier
    first_barrier = next(i for i, s in enumerate(g.body) if isinstance(s, n.Barrier))
    assert any(isinstance(s, n.For) and any(isinstance(x, n.Store) and x.buffer == "d_s" for x in walk(s))
               for s in g.body[:first_barrier])
    count = lambda kernel: sum(isinstance(s, n.Barrier) for s in walk(kernel))  # noqa: E731
    assert count(g) >= 2 * count(k)  # every barrier mirrored in the reverse sweep
    assert "tape" in caching(report)  # fmax needs the values the next step overwrites
    x = np.random.default_rng(9).standard_normal(128)
    check(TREE, 2, 64, {"x": x, "out": np.zeros(2)})


def test_dynamic_shared_memory_shadow_is_interleaved() -> None:
    text = f"""kernel blur(n: i32, x: const f64*, y: f64*) {{
  extern shared tile: f64[]
  tile[{TID}] = {GID} < n ? x[{GID}] : 0.0
  barrier
  if ({GID} < n) {{
    y[{GID}] = tile[{TID}] * tile[({TID} + 1) % (i32)blockDim.x]
  }}
}}
"""
    _, g, _ = grad(text)
    assert [b.name for b in g.buffers if b.space == "shared"] == ["tile"]
    x = np.random.default_rng(10).standard_normal(64)
    check(text, 2, 32, {"n": 60, "x": x, "y": np.zeros(64)}, shmem=32 * 8)


def test_two_active_extern_shared_arrays_are_refused() -> None:
    text = f"""kernel two(x: const f64*, y: f64*) {{
  extern shared a: f64[]
  extern shared b: f64[]
  a[{TID}] = x[{GID}]
  b[{TID}] = x[{GID}]
  y[{GID}] = a[{TID}] * b[{TID}]
}}
"""
    with pytest.raises(UserError, match="extern __shared__"):
        grad(text)


# ----------------------------------------------------------------------------- warp shuffles

def _shuffle_kernel(body: str) -> str:
    return f"""kernel warp(x: const f64*, y: f64*) {{
  var v: f64 = x[{GID}] * x[{GID}]
  var t: f64
{body}
  y[{GID}] = v
}}
"""


@pytest.mark.parametrize("body", [
    # inclusive scan with shfl.up
    """  var o: i32 = 1
  while (o < 32) {
    t = shfl.up(4294967295u, v, (u32)o, 32)
    if ((i32)(threadIdx.x % 32u) >= o) {
      v = v + t
    }
    o = o << 1
  }""",
    # butterfly reduction with shfl.xor, in segments of 16 lanes
    """  var o: i32 = 8
  while (o > 0) {
    t = shfl.xor(4294967295u, v, (u32)o, 16)
    v = v * 0.5 + t * t
    o = o >> 1
  }""",
    # broadcast and rotation with shfl.idx
    """  t = shfl.idx(4294967295u, v, 0u, 32)
  v = v * t
  t = shfl.idx(4294967295u, v, threadIdx.x + 3u, 8)
  v = v + 0.5 * t""",
    # shuffle by part of a warp only
    """  if (threadIdx.x % 32u < 16u) {
    t = shfl.down(65535u, v, 3u, 16)
    v = v - t * v
  }""",
], ids=["up", "xor", "idx", "partial-down"])
def test_warp_shuffles_are_transposed(body: str) -> None:
    x = np.random.default_rng(11).uniform(-1, 1, 64)
    check(_shuffle_kernel(body), 1, 64, {"x": x, "y": np.zeros(64)})


# ----------------------------------------------------------------------------- atomics

def test_atomic_add_of_active_values_into_data_dependent_bins() -> None:
    text = f"""kernel hist(n: i32, bins: const i32*, w: const f64*, h: f64*) {{
  if ({GID} < n) {{
    atomic.add h[bins[{GID}]], w[{GID}] * w[{GID}]
  }}
}}
"""
    rng = np.random.default_rng(12)
    args = {"n": 100, "bins": rng.integers(0, 8, 128).astype(np.int32), "w": rng.standard_normal(128),
            "h": rng.standard_normal(8)}
    check(text, 4, 32, args)


@pytest.mark.parametrize("op", ["max", "exch"])
def test_atomics_without_a_rule_are_refused_with_their_location(op: str) -> None:
    text = f"""kernel m(x: const f64*, y: f64*) {{
  atomic.{op} y[0], x[{GID}]
}}
"""
    with pytest.raises(UserError, match=f"atomic.{op}") as info:
        grad(text)
    assert info.value.loc is not None and info.value.loc.line == 2


def test_atomic_result_of_active_memory_is_refused() -> None:
    text = f"""kernel m(x: const f64*, y: f64*, z: f64*) {{
  var old: f64
  old = atomic.add y[0], x[{GID}]
  z[{GID}] = old
}}
"""
    with pytest.raises(UserError, match="depends on the order"):
        grad(text)


# ----------------------------------------------------------------------------- refusals

def test_active_store_to_a_module_array_is_refused() -> None:
    text = f"""kernel m(x: const f64*) {{
  device g: f64[64]
  g[{GID}] = x[{GID}] * 2.0
}}
"""
    with pytest.raises(UserError, match="module array 'g'") as info:
        grad(text)
    assert info.value.loc is not None and info.value.loc.line == 3


def test_unrecoverable_value_in_a_loop_bounded_by_memory_is_refused() -> None:
    # A trip count that is a kernel argument sizes its tape at launch (tests/test_runtime_trips.py);
    # one read from memory has no formula, so the overwritten value cannot be recovered.
    text = f"""kernel inplace(n: i32, bound: const i32*, y: f64*) {{
  if ({GID} < n) {{
    for k: i32 = 0 to bound[{GID}] step 1 {{
      y[{GID} * 4 + k % 4] = y[{GID} * 4 + k % 4] * y[{GID} * 4 + k % 4]
    }}
  }}
}}
"""
    with pytest.raises(UserError, match="cannot recover the value") as info:
        grad(text)
    assert "trip count" in info.value.message and info.value.loc is not None


def test_gradient_pairs_follow_the_convention() -> None:
    k, g, _ = grad(SEMANTICS)
    assert shadow_pairs(k, g) == {"x": "d_x", "y": "d_y", "acc": "d_acc", "io": "d_io"}


def test_do_while_from_cuda_source(tmp_path) -> None:
    import polypy
    src = tmp_path / "dw.cu"
    src.write_text("""__global__ void settle(const double* x, double* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    double v = x[i];
    int steps = 0;
    do {
        v = 0.5 * v * v + 0.75;
        ++steps;
    } while (v < 2.0 && steps < 50);
    y[i] = v * steps;
}
""")
    module = polypy.load(src)
    k = module.kernel("settle")
    g = grad_kernel(module, "settle")
    f = grad_kernel(module, "settle", mode="forward")
    args = {"x": np.random.default_rng(13).uniform(0.2, 1.2, 64), "y": np.zeros(64), "n": 60}
    result = check_gradients(k, g, 2, 32, args, k_fwd=f)
    assert result.error() < 1e-6, result


def test_struct_parameter_names_stand_for_their_members(tmp_path) -> None:
    import polypy
    from samples.spec import sample
    module = polypy.load(sample("struct_params").source)
    names = [p.name for p in grad_kernel(module, "struct_params", wrt=["p"]).params]
    assert names == ["p_n", "p_alpha", "d_p_alpha", "p_beta", "d_p_beta", "p_lo", "d_p_lo", "p_hi", "d_p_hi",
                     "x", "y", "d_y"]
    names = [p.name for p in grad_kernel(module, "struct_params", const=["p"]).params]
    assert names == ["p_n", "p_alpha", "p_beta", "p_lo", "p_hi", "x", "d_x", "y", "d_y"]
