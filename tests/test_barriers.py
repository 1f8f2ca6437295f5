"""Barrier decisions of ``eliminate_barriers`` on small kernels, with their explanations.

(The golden files in ``tests/golden/barriers`` check the same pass as IR text and re-run
every result in the emulator; here the structured decisions are checked one by one.)
"""
from __future__ import annotations

from gpu2cpu.barriers import BarrierDecision, eliminate_barriers
from gpu2cpu.forward_shared import eliminate_dead_shared_stores, forward_shared_stores
from polypy.ir import Barrier, parse_kernel, print_kernel, walk
from polypy.passes import SIMPLIFY, run_pipeline
from polypy.poly import BarrierAnalysis


def prepare(text: str):
    return run_pipeline(parse_kernel(text, filename="k.cu"), SIMPLIFY)


def decide(text: str):
    report: list[BarrierDecision] = []
    kernel = eliminate_barriers(prepare(text), report=report)
    return kernel, report


def removed(report: list[BarrierDecision]) -> list[bool]:
    return [d.removed for d in report]


def count_barriers(kernel) -> int:
    return sum(isinstance(x, Barrier) for x in walk(kernel))


HEADER = "kernel k(n: i32, x: const f32* restrict, y: f32* restrict) {\n  shared s: f32[1024]\n"
GID = "(i32)(blockIdx.x * blockDim.x + threadIdx.x)"


def body(text: str, header: str = HEADER) -> str:
    return header + text + "\n}\n"


# --------------------------------------------------------------------------- the hazards


def test_own_slot_barrier_is_removed_with_reason() -> None:
    kernel, report = decide(body(f"""
  s[threadIdx.x] = x[{GID}]
  barrier
  y[{GID}] = s[threadIdx.x]"""))
    assert removed(report) == [True]
    assert report[0].reason == "threads of a block touch disjoint elements of s"
    assert count_barriers(kernel) == 0


def test_neighbour_read_keeps_barrier_for_raw() -> None:
    _, report = decide(body(f"""
  s[threadIdx.x] = x[{GID}]
  barrier
  if (threadIdx.x > 0u) {{
    y[{GID}] = s[threadIdx.x - 1u]
  }}"""))
    assert removed(report) == [False]
    c = report[0].conflict
    assert c is not None and c.hazard == "RAW" and c.buffers == ("s",)
    assert (c.first.kind, c.second.kind) == ("write", "read")
    assert (c.first.line, c.second.line) == (4, 7)


def test_barrier_needed_only_for_war() -> None:
    _, report = decide(body(f"""
  var v: f32 = 0.0f
  if (threadIdx.x > 0u) {{
    v = s[threadIdx.x - 1u]
  }}
  barrier
  s[threadIdx.x] = v
  y[{GID}] = v"""))
    assert removed(report) == [False]
    assert report[0].conflict.hazard == "WAR"


def test_barrier_needed_only_for_waw() -> None:
    _, report = decide(body("""
  if (threadIdx.x == 0u) {
    s[0] = 1.0f
  }
  barrier
  if (threadIdx.x == 1u) {
    s[0] = 2.0f
  }"""))
    assert removed(report) == [False]
    assert report[0].conflict.hazard == "WAW"


def test_barrier_needed_only_across_loop_iterations() -> None:
    _, report = decide(body(f"""
  var acc: f32 = 0.0f
  for k: i32 = 0 to 4 step 1 {{
    s[threadIdx.x] = x[{GID} + k]
    barrier
    acc = acc + s[(threadIdx.x + 1u) % blockDim.x]
    barrier
  }}
  y[{GID}] = acc"""))
    assert removed(report) == [False, False]
    first, second = report
    assert first.conflict.hazard == "RAW" and first.conflict.carried_by is None
    assert second.conflict.hazard == "WAR"
    assert second.conflict.carried_by is not None and second.conflict.carried_by.line == 5
    assert "across iterations of the loop at line 5" in second.reason


def test_loop_end_barrier_removed_when_iterations_touch_own_slots() -> None:
    _, report = decide(body(f"""
  var acc: f32 = 0.0f
  for k: i32 = 0 to 4 step 1 {{
    s[threadIdx.x] = x[{GID} + k]
    barrier
    acc = acc + s[threadIdx.x]
    barrier
  }}
  y[{GID}] = acc"""))
    assert removed(report) == [True, True]


def test_wrap_around_before_and_after_loop() -> None:
    # Written before the loop, read by a neighbour after it: the barrier in the (possibly
    # empty) loop cannot be relied upon, so the barrier before the loop stays.
    _, report = decide(body(f"""
  s[threadIdx.x] = x[{GID}]
  barrier
  for k: i32 = 0 to n step 1 {{
    barrier
  }}
  y[{GID}] = s[(threadIdx.x + 1u) % blockDim.x]"""))
    assert removed(report) == [False, True]


def test_consecutive_barriers_keep_exactly_one() -> None:
    kernel, report = decide(body(f"""
  s[threadIdx.x] = x[{GID}]
  barrier
  barrier
  y[{GID}] = s[(threadIdx.x + 1u) % blockDim.x]"""))
    assert removed(report) == [True, False]
    assert count_barriers(kernel) == 1


def test_barrier_without_memory_accesses_is_removed() -> None:
    _, report = decide(body(f"""
  var a: f32 = 2.0f
  barrier
  y[{GID}] = a"""))
    assert removed(report) == [True]
    assert report[0].reason == "no conflicting accesses between the kernel entry and the kernel exit"


# --------------------------------------------------------------------------- aliasing


ALIAS = """kernel k(n: i32, a: f32*, b: const f32*{restrict}, c: f32* restrict) {{
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  a[i] = 1.0f
  barrier
  c[i] = b[i + 1]
}}
"""


def test_pointer_parameters_without_restrict_may_alias() -> None:
    _, report = decide(ALIAS.format(restrict=""))
    assert removed(report) == [False]
    c = report[0].conflict
    assert c.buffers == ("a", "b") and c.hazard == "RAW"
    assert "may alias" in c.alias


def test_restrict_pointer_does_not_alias() -> None:
    _, report = decide(ALIAS.format(restrict=" restrict"))
    assert removed(report) == [True]


def test_same_pointer_same_element_is_not_a_conflict() -> None:
    _, report = decide(f"""kernel k(n: i32, y: f32*) {{
  y[{GID}] = 1.0f
  barrier
  y[{GID}] = y[{GID}] * 2.0f
}}
""")
    assert removed(report) == [True]


def test_pointer_may_alias_device_array() -> None:
    _, report = decide(f"""kernel k(n: i32, p: f32*) {{
  device g: f32[4096]
  g[{GID}] = 1.0f
  barrier
  p[{GID}] = 2.0f
}}
""")
    assert removed(report) == [False]
    assert report[0].conflict.buffers == ("g", "p")


def test_extern_shared_arrays_share_storage() -> None:
    text = """kernel k(x: const f32* restrict, y: f64* restrict) {
  extern shared sf: f32[]
  extern shared sd: f64[]
  sf[threadIdx.x] = x[threadIdx.x]
  barrier
  y[threadIdx.x] = sd[threadIdx.x]
}
"""
    _, report = decide(text)
    assert removed(report) == [False]
    assert "share storage" in report[0].conflict.alias
    # Static arrays never overlap.
    _, report = decide(text.replace("extern shared sf: f32[]", "shared sf: f32[64]")
                       .replace("extern shared sd: f64[]", "shared sd: f64[64]"))
    assert removed(report) == [True]


def test_extern_shared_same_element_size_same_slot() -> None:
    # sf[t] and si[t] are the same four bytes, touched by the same thread only.
    _, report = decide("""kernel k(x: const f32* restrict, y: i32* restrict) {
  extern shared sf: f32[]
  extern shared si: i32[]
  sf[threadIdx.x] = x[threadIdx.x]
  barrier
  y[threadIdx.x] = si[threadIdx.x]
}
""")
    assert removed(report) == [True]


# --------------------------------------------------------------------------- classic kernels


REDUCE = f"""kernel reduce(n: i32, x: const f32* restrict, out: f32* restrict) {{
  shared sdata: f32[1024]
  sdata[threadIdx.x] = {GID} < n ? x[{GID}] : 0.0f
  barrier
  var s: u32 = blockDim.x / 2u
  while (s > 0u) {{
    if (threadIdx.x < s) {{
      sdata[threadIdx.x] = sdata[threadIdx.x] + sdata[threadIdx.x + s]
    }}
    barrier
  }} update {{
    s = s >> 1
  }}
  if (threadIdx.x == 0u) {{
    out[blockIdx.x] = sdata[0]
  }}
}}
"""


def test_tree_reduction_keeps_its_barriers() -> None:
    _, report = decide(REDUCE)
    assert removed(report) == [False, False]
    assert report[1].conflict.carried_by is not None  # across iterations of the while loop


MATMUL = """kernel matmul(n: i32, a: const f32*, b: const f32*, c: f32*) {
  shared as: f32[16][16]
  shared bs: f32[16][16]
  var row: i32 = (i32)(blockIdx.y * 16u + threadIdx.y)
  var col: i32 = (i32)(blockIdx.x * 16u + threadIdx.x)
  var acc: f32 = 0.0f
  for t: i32 = 0 to n / 16 step 1 {
    as[threadIdx.y][threadIdx.x] = a[row * n + t * 16 + (i32)threadIdx.x]
    bs[threadIdx.y][threadIdx.x] = b[(t * 16 + (i32)threadIdx.y) * n + col]
    barrier
    for k: i32 = 0 to 16 step 1 {
      acc = acc + as[threadIdx.y][k] * bs[k][threadIdx.x]
    }
    barrier
  }
  c[row * n + col] = acc
}
"""


def test_tiled_matmul_keeps_both_barriers_of_the_k_loop() -> None:
    _, report = decide(MATMUL)
    assert removed(report) == [False, False]
    # the pair nearest the barrier explains it: the store to bs comes right before it
    assert report[0].conflict.hazard == "RAW" and report[0].conflict.buffers == ("bs",)
    assert report[1].conflict.hazard == "WAR" and report[1].conflict.carried_by.line == 7


def test_transpose_through_shared_memory_keeps_barrier() -> None:
    _, report = decide("""kernel transpose(w: i32, h: i32, input: const f32* restrict, output: f32* restrict) {
  shared tile: f32[16][17]
  tile[threadIdx.y][threadIdx.x] = input[(i32)(blockIdx.y * 16u + threadIdx.y) * w + (i32)(blockIdx.x * 16u + threadIdx.x)]
  barrier
  output[(i32)(blockIdx.x * 16u + threadIdx.y) * h + (i32)(blockIdx.y * 16u + threadIdx.x)] = tile[threadIdx.x][threadIdx.y]
}
""")
    assert removed(report) == [False]
    assert report[0].conflict.buffers == ("tile",)


BPNN = """kernel bpnn(input: f32*, hidden: f32*, partial: f32*, hid: i32) {
  shared node: f32[16]
  shared weights: f32[16][16]
  var index: i32 = (hid + 1) * 16 * (i32)blockIdx.y + (hid + 1) * (i32)threadIdx.y + (i32)threadIdx.x + 1 + (hid + 1)
  if (threadIdx.x == 0u) {
    node[threadIdx.y] = input[16 * (i32)blockIdx.y + (i32)threadIdx.y + 1]
  }
  barrier
  weights[threadIdx.y][threadIdx.x] = hidden[index]
  barrier
  weights[threadIdx.y][threadIdx.x] = weights[threadIdx.y][threadIdx.x] * node[threadIdx.y]
  barrier
  for i: i32 = 1 to 5 step 1 {
    var p: i32 = (i32)pow(2.0f, (f32)i)
    if ((i32)threadIdx.y % p == 0) {
      weights[threadIdx.y][threadIdx.x] = weights[threadIdx.y][threadIdx.x] + weights[(i32)threadIdx.y + p / 2][threadIdx.x]
    }
    barrier
  }
  hidden[index] = weights[threadIdx.y][threadIdx.x]
  barrier
  if (threadIdx.x == 0u) {
    partial[(i32)blockIdx.y * hid + (i32)threadIdx.y] = weights[threadIdx.x][threadIdx.y]
  }
}
"""


def test_backprop_first_barrier_removable_reduction_kept() -> None:
    _, report = decide(BPNN)
    assert removed(report) == [True, False, False, False, False]
    assert report[0].reason.startswith("no conflicting accesses between the kernel entry and the barrier at line 10")
    assert report[1].conflict.buffers == ("node",) and report[1].conflict.hazard == "RAW"
    assert report[3].conflict.carried_by is not None  # the reduction loop
    assert "may alias" in report[4].conflict.alias  # hidden and partial: pointers without restrict


def test_backprop_forwarding_and_the_first_two_barriers() -> None:
    original = prepare(BPNN)
    kernel = eliminate_dead_shared_stores(forward_shared_stores(original))
    text = print_kernel(kernel)
    # The load after the second barrier reads a local; the store before it is gone.
    assert "weights[threadIdx.y][threadIdx.x] = weights_fwd * node[threadIdx.y]" in text
    assert "weights[threadIdx.y][threadIdx.x] = weights_fwd\n" not in text
    for k in (original, kernel):
        analysis = BarrierAnalysis(k)
        paths = [b.path for b in analysis.barriers]
        # Each of the first two barriers is removable while the other stays (exact analysis:
        # the weights accesses around the second barrier are the thread's own slot) ...
        assert analysis.conflict(paths[0], paths) is None
        assert analysis.conflict(paths[1], paths) is None
        # ... but not both: node[ty] is written by thread (0, ty) and read by every thread.
        conflict = analysis.conflict(paths[1], [p for p in paths if p != paths[0]])
        assert conflict is not None and conflict.buffers == ("node",) and conflict.hazard == "RAW"
    _, report = decide(text)
    assert removed(report) == [True, False, False, False, False]


# --------------------------------------------------------------------------- control flow


def test_barriers_in_block_uniform_if() -> None:
    _, report = decide(body(f"""
  if (n > 64) {{
    s[threadIdx.x] = x[{GID}]
    barrier
    var v: f32 = s[threadIdx.x] + s[(threadIdx.x + 1u) % blockDim.x]
    barrier
    y[{GID}] = v
  }}"""))
    assert removed(report) == [False, True]


def test_barrier_under_data_dependent_condition_is_not_relied_upon() -> None:
    _, report = decide(f"""kernel k(flag: const i32* restrict, x: const f32* restrict, y: f32* restrict) {{
  shared s: f32[1024]
  s[threadIdx.x] = x[{GID}]
  barrier
  if (flag[0] > 0) {{
    barrier
  }}
  y[{GID}] = s[(threadIdx.x + 1u) % blockDim.x]
}}
""")
    # The conditional barrier may not run, so the first one stays; the conditional one goes.
    assert removed(report) == [False, True]


def test_thread_dependent_early_exit() -> None:
    text = body(f"""
  if ({GID} >= n) {{
    return
  }}
  s[threadIdx.x] = x[{GID}]
  barrier
  y[{GID}] = s[INDEX]""")
    _, report = decide(text.replace("INDEX", "threadIdx.x"))
    assert removed(report) == [True]
    _, report = decide(text.replace("INDEX", "(threadIdx.x + 1u) % blockDim.x"))
    assert removed(report) == [False]


def test_unknown_index_conflicts_with_everything() -> None:
    _, report = decide(f"""kernel k(idx: const i32* restrict, x: const f32* restrict, y: f32* restrict) {{
  shared s: f32[1024]
  s[threadIdx.x] = x[{GID}]
  barrier
  y[{GID}] = s[idx[{GID}]]
}}
""")
    assert removed(report) == [False]


# --------------------------------------------------------------------------- memory kinds


def test_global_memory_conflict_between_threads_of_a_block() -> None:
    _, report = decide(f"""kernel k(n: i32, x: const f32* restrict, y: f32*, z: f32* restrict) {{
  y[{GID}] = x[{GID}]
  barrier
  var v: f32 = y[{GID}]
  if ({GID} + 1 < n) {{
    v = v + y[{GID} + 1]
  }}
  barrier
  z[{GID}] = v
}}
""")
    assert removed(report) == [False, True]
    assert report[0].conflict.buffers == ("y",)


def test_local_arrays_never_conflict() -> None:
    _, report = decide(f"""kernel k(x: const f32* restrict, y: f32* restrict) {{
  local t: f32[4]
  t[0] = x[{GID}]
  barrier
  y[{GID}] = t[1]
}}
""")
    assert removed(report) == [True]


ATOMICS = """kernel k(x: const i32* restrict, out: i32* restrict) {
  shared acc: i32[4]
  OPS
}
"""


def test_commuting_atomics_do_not_conflict() -> None:
    _, report = decide(ATOMICS.replace("OPS", """atomic.add acc[0], 1
  barrier
  atomic.add acc[0], x[threadIdx.x]
  atomic.sub acc[0], 2"""))
    assert removed(report) == [True]
    assert "commuting atomic" in report[0].reason


def test_atomic_then_load_conflicts() -> None:
    _, report = decide(ATOMICS.replace("OPS", """atomic.add acc[0], 1
  barrier
  out[threadIdx.x] = acc[0]"""))
    assert removed(report) == [False]
    assert report[0].conflict.hazard == "RAW"
    assert report[0].conflict.first.kind == "atomic"


def test_atomics_that_do_not_commute_conflict() -> None:
    _, report = decide(ATOMICS.replace("OPS", """atomic.add acc[0], 1
  barrier
  atomic.exch acc[0], 7"""))
    assert removed(report) == [False]
    # An atomic whose old value is used observes the order too.
    _, report = decide(ATOMICS.replace("OPS", """var old: i32 = 0
  atomic.add acc[0], 1
  barrier
  old = atomic.add acc[0], 1
  out[threadIdx.x] = old"""))
    assert removed(report) == [False]


# --------------------------------------------------------------------------- the pass itself


def test_report_format_and_order() -> None:
    _, report = decide(body(f"""
  s[threadIdx.x] = x[{GID}]
  barrier
  var v: f32 = s[(threadIdx.x + 1u) % blockDim.x]
  barrier
  y[{GID}] = v"""))
    lines = [d.format() for d in report]
    assert lines[0].startswith("k.cu:5:3: barrier kept: RAW hazard on s: write of s[threadIdx.x] (line 4) "
                               "and read of s[(threadIdx.x + 1u) % blockDim.x] (line 6) by another thread")
    assert lines[1] == ("k.cu:7:3: barrier removed: no conflicting accesses between the barrier at line 5 "
                        "and the kernel exit")


def test_pass_is_pure_and_idempotent() -> None:
    kernel = prepare(BPNN)
    text = print_kernel(kernel)
    once = eliminate_barriers(kernel)
    assert print_kernel(kernel) == text
    report: list[BarrierDecision] = []
    twice = eliminate_barriers(once, report=report)
    assert print_kernel(twice) == print_kernel(once)
    assert not any(d.removed for d in report)
    assert eliminate_barriers(prepare(REDUCE)) == prepare(REDUCE)


def test_a_gradients_kept_barriers_are_decided_by_the_pairs_nearest_them(monkeypatch) -> None:
    # nbody_step's gradient has 201 accesses (4,537 pairs) and 11 barriers. In program order the
    # search for a kept barrier's conflict asked isl about ~2,600 pairs (7 s); nearest first,
    # each kept barrier is decided by its first few (issue 12, item 5).
    from polypy.driver.gradients import grad_kernel
    from polypy.driver.source import load
    from polypy.poly.hazards import BarrierAnalysis as Analysis
    from samples.spec import sample

    s = sample("nbody_step")
    gradient = grad_kernel(load(s.source, defines=dict(s.defines)), s.kernel)
    gradient = eliminate_dead_shared_stores(forward_shared_stores(gradient))
    asked = []
    only_by = Analysis._only_by
    monkeypatch.setattr(Analysis, "_only_by", lambda self, *a: asked.append(a[1:3]) or only_by(self, *a))
    report: list[BarrierDecision] = []
    eliminate_barriers(gradient, report=report)
    assert len(report) == 11 and sum(not d.removed for d in report) == 10
    assert len(asked) < 1000, len(asked)
    assert all(d.conflict is not None for d in report if not d.removed)
