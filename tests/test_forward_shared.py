"""Shared-memory store->load forwarding and dead shared stores.

(The golden files ``tests/golden/barriers/{backprop,forward_*,dead_*}.ir`` check the IR text of
these passes and re-run the results in the emulator.)
"""
from __future__ import annotations

import numpy as np

import polypy
from gpu2cpu.forward_shared import eliminate_dead_shared_stores, forward_shared_stores
from polypy.ir import parse_kernel, print_kernel, verify_kernel
from polypy.passes import SIMPLIFY, run_pipeline
from polypy.poly import dead_shared_stores, forwardable_loads, format_path, space
from polypy.poly.block_races import block_races

GID = "(i32)(blockIdx.x * blockDim.x + threadIdx.x)"


def prepare(text: str):
    return run_pipeline(parse_kernel(text), SIMPLIFY)


def kernel(stmts: str, header: str = "") -> str:
    return (f"kernel k(n: i32, x: const f32* restrict, y: f32* restrict, flag: const i32* restrict) {{\n"
            f"  shared s: f32[1024]\n{header}{stmts}\n}}\n")


def forwarded(text: str) -> list[tuple[str, str]]:
    return [(str(f.load), format_path(f.store)) for f in forwardable_loads(prepare(text))]


def dead(text: str) -> list[str]:
    return [format_path(p) for p in dead_shared_stores(prepare(text))]


# --------------------------------------------------------------------------- forwarding


def test_forwarding_across_a_barrier() -> None:
    text = kernel(f"""  s[threadIdx.x] = x[{GID}]
  barrier
  y[{GID}] = s[threadIdx.x] * 2.0f""")
    assert forwarded(text) == [("body[2]#0", "body[0]")]
    result = forward_shared_stores(prepare(text))
    verify_kernel(result)
    assert print_kernel(result).splitlines()[2:7] == [
        f"  var s_fwd: f32 = x[{GID}]",
        "  s[threadIdx.x] = s_fwd",
        "  barrier",
        f"  y[{GID}] = s_fwd * 2.0f",
        "}",
    ]


def test_no_forwarding_when_another_thread_writes_in_between() -> None:
    text = kernel(f"""  s[threadIdx.x] = x[{GID}]
  barrier
  s[(threadIdx.x + 1u) % blockDim.x] = 1.0f
  barrier
  y[{GID}] = s[threadIdx.x]""")
    assert forwarded(text) == [("body[4]#0", "body[2]")] or forwarded(text) == []
    assert ("body[4]#0", "body[0]") not in forwarded(text)


def test_no_forwarding_when_another_thread_may_write_in_the_same_phase() -> None:
    # No barrier between the other thread's write and the load: it may come before or after.
    text = kernel(f"""  s[threadIdx.x] = x[{GID}]
  barrier
  if (threadIdx.x == 0u) {{
    s[1] = 5.0f
  }}
  y[{GID}] = s[threadIdx.x]""")
    assert forwarded(text) == []


def test_forwarding_when_the_other_write_is_ordered_before_the_store() -> None:
    text = kernel(f"""  if (threadIdx.x == 0u) {{
    s[1] = 5.0f
  }}
  barrier
  s[threadIdx.x] = x[{GID}]
  y[{GID}] = s[threadIdx.x]""")
    assert forwarded(text) == [("body[3]#0", "body[2]")]


def test_no_forwarding_across_a_same_thread_write_to_the_element() -> None:
    text = kernel(f"""  s[threadIdx.x] = x[{GID}]
  s[threadIdx.x * 1u] = 3.0f
  y[{GID}] = s[threadIdx.x]""")
    # The load reads the second store, which is forwardable instead.
    assert forwarded(text) == [("body[2]#0", "body[1]")]


def test_no_forwarding_from_a_store_under_an_unknown_condition() -> None:
    text = kernel(f"""  s[threadIdx.x] = 0.0f
  barrier
  if (flag[threadIdx.x] > 0) {{
    s[threadIdx.x] = x[{GID}]
  }}
  y[{GID}] = s[threadIdx.x]""")
    assert forwarded(text) == []


def test_no_forwarding_of_another_element() -> None:
    text = kernel(f"""  s[threadIdx.x] = x[{GID}]
  barrier
  y[{GID}] = s[(threadIdx.x + 1u) % blockDim.x]""")
    assert forwarded(text) == []


def test_forwarding_inside_a_loop_declares_the_local_in_the_body() -> None:
    text = kernel(f"""  var acc: f32 = 0.0f
  for k: i32 = 0 to n step 1 {{
    s[threadIdx.x] = x[{GID} + k]
    barrier
    acc = acc + s[threadIdx.x]
    barrier
  }}
  y[{GID}] = acc""")
    result = print_kernel(forward_shared_stores(prepare(text)))
    assert f"    var s_fwd: f32 = x[{GID} + k]\n    s[threadIdx.x] = s_fwd\n" in result
    assert "acc = acc + s_fwd" in result


def test_forwarding_after_a_loop_needs_a_nonempty_loop() -> None:
    loop = f"""  for k: i32 = 0 to TRIPS step 1 {{
    s[threadIdx.x] = x[{GID} + k]
  }}
  barrier
  y[{GID}] = s[threadIdx.x]"""
    # The last iteration's value reaches the load; the local is declared at the top.
    result = forward_shared_stores(prepare(kernel(loop.replace("TRIPS", "4"))))
    verify_kernel(result)
    text = print_kernel(result)
    assert text.splitlines()[2] == "  var s_fwd: f32"
    assert f"    s_fwd = x[{GID} + k]" in text and f"  y[{GID}] = s_fwd" in text
    # With n iterations the loop may not run: the load may read what was there before.
    assert forwarded(kernel(loop.replace("TRIPS", "n"))) == []


def test_forwarding_through_a_mutable_value_keeps_the_stored_value() -> None:
    text = kernel(f"""  var v: f32 = x[{GID}]
  s[threadIdx.x] = v
  v = 7.0f
  barrier
  y[{GID}] = s[threadIdx.x] + v""")
    result = print_kernel(forward_shared_stores(prepare(text)))
    assert "  var s_fwd: f32 = v\n  s[threadIdx.x] = s_fwd\n  v = 7.0f\n" in result
    assert "= s_fwd + v" in result


def test_extern_shared_alias_write_blocks_forwarding() -> None:
    text = f"""kernel k(x: const f32* restrict, y: f32* restrict) {{
  extern shared a: f32[]
  extern shared b: i32[]
  a[threadIdx.x] = x[{GID}]
  b[threadIdx.x] = 3
  y[{GID}] = a[threadIdx.x]
}}
"""
    assert forwarded(text) == []
    # b[t + 1] is a[t + 1]: read by thread t + 1 in the same phase, so still no forwarding.
    assert forwarded(text.replace("b[threadIdx.x] = 3", "b[threadIdx.x + 1u] = 3")) == []
    # Beyond any thread's slot of a, b does not interfere.
    assert forwarded(text.replace("b[threadIdx.x] = 3", "b[threadIdx.x + 1024u] = 3")) == [("body[2]#0", "body[0]")]


# --------------------------------------------------------------------------- dead stores


def test_store_overwritten_before_anyone_reads_is_dead() -> None:
    text = kernel(f"""  s[threadIdx.x] = 1.0f
  s[threadIdx.x] = x[{GID}]
  barrier
  y[{GID}] = s[(threadIdx.x + 1u) % blockDim.x]""")
    assert dead(text) == ["body[0]"]
    result = print_kernel(eliminate_dead_shared_stores(prepare(text)))
    assert "s[threadIdx.x] = 1.0f" not in result


def test_store_read_by_another_thread_is_live() -> None:
    text = kernel(f"""  s[threadIdx.x] = 1.0f
  barrier
  var v: f32 = s[(threadIdx.x + 1u) % blockDim.x]
  barrier
  s[threadIdx.x] = x[{GID}]
  y[{GID}] = v + s[threadIdx.x]""")
    assert dead(text) == []


def test_store_read_by_an_unordered_thread_is_live() -> None:
    # Another thread may read s[t] before t overwrites it: no barrier orders them.
    text = kernel(f"""  s[threadIdx.x] = 1.0f
  barrier
  var v: f32 = s[(threadIdx.x + 1u) % blockDim.x]
  s[threadIdx.x] = x[{GID}]
  y[{GID}] = v""")
    assert dead(text) == []


def test_store_never_read_is_dead() -> None:
    text = kernel(f"""  s[threadIdx.x] = x[{GID}]
  barrier
  y[{GID}] = 1.0f""")
    assert dead(text) == ["body[0]"]


def test_store_read_by_an_atomic_is_live() -> None:
    text = """kernel k(y: i32* restrict) {
  shared c: i32[64]
  c[threadIdx.x] = 1
  barrier
  atomic.add c[0], 1
  barrier
  y[threadIdx.x] = c[threadIdx.x]
}
"""
    assert dead(text) == []


def test_dead_stores_are_removed_one_at_a_time() -> None:
    text = kernel(f"""  s[threadIdx.x] = 1.0f
  s[threadIdx.x] = 2.0f
  s[threadIdx.x] = x[{GID}]
  barrier
  y[{GID}] = s[(threadIdx.x + 1u) % blockDim.x]""")
    result = print_kernel(eliminate_dead_shared_stores(prepare(text)))
    assert "1.0f" not in result and "2.0f" not in result
    assert f"s[threadIdx.x] = x[{GID}]" in result


def test_passes_return_the_input_when_nothing_applies() -> None:
    k = prepare(kernel(f"""  s[threadIdx.x] = x[{GID}]
  barrier
  y[{GID}] = s[(threadIdx.x + 1u) % blockDim.x]"""))
    assert forward_shared_stores(k) is k
    assert eliminate_dead_shared_stores(k) is k


# --------------------------------------------------------------------------- isl budget


def test_a_question_past_the_isl_budget_gets_the_conservative_answer(monkeypatch) -> None:
    import islpy as isl

    from polypy.poly import space

    start = isl.Set("[n] -> { [i, j] : 0 <= i < n and 0 <= j < i and exists e : i = 3 * e + 1 }")
    holes = [isl.Set(f"[n] -> {{ [i, j] : exists f : j = 5 * f + {k} }}") for k in range(5)]

    def blowup() -> isl.Set:
        s = start
        for k in range(40):
            s = s - holes[k % 5]
        return s

    monkeypatch.setattr(space, "ISL_BUDGET", 1000)
    assert space.bounded(blowup, "gave up") == "gave up"
    # The context is unlimited again afterwards, and other isl errors (spaces that do not
    # match) still raise.
    assert space.CTX.get_max_operations() == 0
    assert blowup().is_empty()  # every residue of j modulo 5 removed
    try:
        space.bounded(lambda: start.intersect(isl.Set("{ [i] }")), None)
    except isl.Error:
        pass
    else:
        raise AssertionError("a syntax error was swallowed")
    # Inside a bounded question, the outer budget governs.
    assert space.bounded(lambda: space.bounded(blowup, "inner"), "outer") == "outer"


def test_forwarding_past_the_isl_budget_leaves_the_kernel_as_it_was(monkeypatch) -> None:
    from polypy.poly import space

    text = kernel(f"""  s[threadIdx.x] = x[{GID}]
  barrier
  y[{GID}] = s[threadIdx.x] * 2.0f""")
    monkeypatch.setattr(space, "ISL_BUDGET", 10)
    assert forwarded(text) == []
    assert dead(text) == []
    assert print_kernel(forward_shared_stores(prepare(text))) == print_kernel(prepare(text))


# --------------------------------------------------------------------------- a 3-D block's tile

# Written in the style of dct8x8's CUDAkernel2DCT (our own transform): a block of (8, 4, 2) threads
# owns a 16 x 32 tile in shared memory; each thread copies in a column of 8, then transforms a row
# of an 8 x 8 block in place, then a column, then copies out: 34 shared accesses in 3-D thread ids,
# none racing, none forwardable. The race checks of `lockstep-warps` and the dataflow of
# `forward-shared-stores` / `eliminate-dead-shared-stores` asked isl about every pair of them over
# symbolic launch extents (and `p - threadIdx.x` gave every index a `mod 2**32`): minutes. Now each
# question is asked at fixed launches first (`Copies.launch_probes`, `RaceQuestion.decide`'s
# witnesses), which answers nearly all of them at once, exactly.
TILE_PAIRS = r"""
#define TILE_STRIDE 33  // 32 columns and one of padding

// Sums and differences of neighbours, in place: v[0..3] = pair sums, v[4..7] = pair differences.
__device__ void pairs8(float *v, int step)
{
    float a0 = v[0 * step], a1 = v[1 * step], a2 = v[2 * step], a3 = v[3 * step];
    float a4 = v[4 * step], a5 = v[5 * step], a6 = v[6 * step], a7 = v[7 * step];
    v[0 * step] = a0 + a1;
    v[1 * step] = a2 + a3;
    v[2 * step] = a4 + a5;
    v[3 * step] = a6 + a7;
    v[4 * step] = a0 - a1;
    v[5 * step] = a2 - a3;
    v[6 * step] = a4 - a5;
    v[7 * step] = a6 - a7;
}

// Thread (x, y, z) owns column y * 8 + x of the rows z * 8 .. z * 8 + 7, then row z * 8 + x of
// the 8 x 8 block y.
__global__ void pairs2d(float *dst, const float *src, int stride)
{
    __shared__ float tile[16 * TILE_STRIDE];
    int col = threadIdx.y * 8 + threadIdx.x;
    int row0 = threadIdx.z * 8;
    const float *in = src + (blockIdx.y * 16 + row0) * stride + blockIdx.x * 32 + col;
    float *out = dst + (blockIdx.y * 16 + row0) * stride + blockIdx.x * 32 + col;
    float *mine = tile + row0 * TILE_STRIDE + col;
    for (unsigned int i = 0; i < 8; i++)
        mine[i * TILE_STRIDE] = in[i * stride];
    __syncthreads();
    pairs8(tile + (row0 + threadIdx.x) * TILE_STRIDE + col - threadIdx.x, 1);
    __syncthreads();
    pairs8(mine, TILE_STRIDE);
    __syncthreads();
    for (unsigned int i = 0; i < 8; i++)
        out[i * stride] = mine[i * TILE_STRIDE];
}
"""

# isl's count of its elementary steps is the work counter (deterministic, unlike a clock): the
# questions below took 1.2-1.3 million steps (races) and 0.9-1.0 million (forwarding and dead
# stores, the model built once) when this was written; before, more than 3 million each (the
# passes on this kernel: lockstep-warps 260 s, forward-shared-stores 160 s, a loaded machine).
RACE_BUDGET = 2_000_000
DATAFLOW_BUDGET = 2_000_000


def _tile_kernel(tmp_path):
    path = tmp_path / "tile.cu"
    path.write_text(TILE_PAIRS)
    return polypy.load(str(path)).kernel("pairs2d")


def test_the_race_check_of_a_3d_block_tile_stays_within_an_isl_budget(tmp_path, monkeypatch) -> None:
    k = _tile_kernel(tmp_path)
    monkeypatch.setattr(space, "ISL_BUDGET", RACE_BUDGET)
    assert space.bounded(lambda: block_races(k), "over budget") == []


def test_the_dataflow_of_a_3d_block_tile_stays_within_an_isl_budget(tmp_path, monkeypatch) -> None:
    k = _tile_kernel(tmp_path)
    monkeypatch.setattr(space, "ISL_BUDGET", DATAFLOW_BUDGET)
    assert space.bounded(lambda: (forwardable_loads(k), dead_shared_stores(k)), "over budget") == ([], [])


def test_a_3d_block_tile_transform_matches_numpy(tmp_path) -> None:
    (tmp_path / "tile.cu").write_text(TILE_PAIRS)
    t = np.zeros((8, 8))
    for i in range(4):
        t[i, 2 * i] = t[i, 2 * i + 1] = t[4 + i, 2 * i] = 1.0
        t[4 + i, 2 * i + 1] = -1.0
    rows, cols = 32, 64
    x = np.random.default_rng(7).standard_normal((rows, cols)).astype(np.float32)
    want = np.zeros((rows, cols))
    for r in range(0, rows, 8):
        for c in range(0, cols, 8):
            want[r:r + 8, c:c + 8] = t @ x[r:r + 8, c:c + 8].astype(np.float64) @ t.T
    y = np.zeros_like(x)
    polypy.compile(str(tmp_path / "tile.cu")).pairs2d[(cols // 32, rows // 16), (8, 4, 2)](y, x, cols)
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-5)
