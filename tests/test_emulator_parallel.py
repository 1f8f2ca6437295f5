"""The emulator's parallel semantics: atomics, warp shuffles and votes, and the race detector."""
from __future__ import annotations

import numpy as np
import pytest

from test_emulator_support import FULL_MASK, expect_error, kernel, loc_of

import polypy.emulator.launch as launch
from polypy.emulator import emulate
from polypy.errors import UserError
from polypy.ir import Barrier, Kernel, Mutator, walk
from polypy.ir.nodes import ATOMIC_OPS

# --------------------------------------------------------------------------- atomics


def _rmw(op: str, old: int, value: int, compare: int) -> int:
    """CUDA's definition of each atomic on u32, with Python ints."""
    mask = 0xFFFFFFFF
    return {
        "add": lambda: (old + value) & mask,
        "sub": lambda: (old - value) & mask,
        "max": lambda: max(old, value),
        "min": lambda: min(old, value),
        "and": lambda: old & value,
        "or": lambda: old | value,
        "xor": lambda: old ^ value,
        "exch": lambda: value,
        "cas": lambda: value if old == compare else old,
        "inc": lambda: 0 if old >= value else old + 1,
        "dec": lambda: value if old == 0 or old > value else old - 1,
    }[op]()


@pytest.mark.parametrize("op", [op for op in ATOMIC_OPS if op not in ("malloc", "free")])  # (the heap: test_device_heap)
@pytest.mark.parametrize("with_dest", [True, False])
@pytest.mark.parametrize("address", ["t % 3u", "t % 37u", "t"])
def test_atomic_serializes_in_thread_order(op, with_dest, address):
    threads = 2 * 160
    compare = ", cmp[t]" if op == "cas" else ""
    dest = "old = " if with_dest else ""
    k = kernel(f"""
        kernel k(buf: u32*, val: const u32*, cmp: const u32*, olds: u32*) {{
          var t: u32 = blockIdx.x * blockDim.x + threadIdx.x
          var old: u32 = 12345u
          {dest}atomic.{op} buf[{address}]{compare}, val[t]
          olds[t] = old
        }}
    """)
    rng = np.random.default_rng(3)
    high = 20 if op in ("inc", "dec", "cas") else 2**32
    init = rng.integers(0, high, threads, dtype=np.uint32)
    val = rng.integers(0, high, threads, dtype=np.uint32)
    cmp = rng.integers(0, 3, threads, dtype=np.uint32) + init[:threads] % 2
    buf, olds = init.copy(), np.zeros(threads, np.uint32)
    emulate(k, 2, 160, {"buf": buf, "val": val, "cmp": cmp, "olds": olds})
    expected, expected_olds = [int(v) for v in init], []
    for t in range(threads):
        a = eval(address.replace("u", ""), {"t": t})
        expected_olds.append(expected[a])
        expected[a] = _rmw(op, expected[a], int(val[t]), int(cmp[t]))
    assert buf.tolist() == expected
    assert olds.tolist() == (expected_olds if with_dest else [12345] * threads)


def test_histogram_and_float_atomics_without_dest():
    k = kernel("""
        kernel hist(n: i32, x: const u32*, w: const f32*, counts: u32*, weights: f32*) {
          shared local_counts: u32[16]
          if (threadIdx.x < 16u) {
            local_counts[threadIdx.x] = 0u
          }
          barrier
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {
            atomic.add local_counts[x[i] % 16u], 1u
            atomic.add weights[x[i] % 16u], w[i]
          }
          barrier
          if (threadIdx.x < 16u) {
            atomic.add counts[threadIdx.x], local_counts[threadIdx.x]
          }
        }
    """)
    n = 5000
    rng = np.random.default_rng(9)
    x = rng.integers(0, 1000, n, dtype=np.uint32)
    w = rng.random(n).astype(np.float32)
    counts, weights = np.zeros(16, np.uint32), np.zeros(16, np.float32)
    emulate(k, (n + 255) // 256, 256, {"n": n, "x": x, "w": w, "counts": counts, "weights": weights})
    np.testing.assert_array_equal(counts, np.bincount(x % 16, minlength=16))
    expected = np.zeros(16, np.float32)
    np.add.at(expected, x % 16, w)  # the same float32 additions in thread order
    np.testing.assert_array_equal(weights, expected)


def test_ticket_counter_gives_a_permutation():
    k = kernel("""
        kernel tickets(n: i32, counter: u32*, perm: u32*) {
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {
            var mine: u32 = 0u
            mine = atomic.add counter[0], 1u
            perm[i] = mine
          }
        }
    """)
    n = 3000
    counter, perm = np.zeros(1, np.uint32), np.zeros(n, np.uint32)
    emulate(k, 12, 256, {"n": n, "counter": counter, "perm": perm})
    assert counter[0] == n
    assert sorted(perm.tolist()) == list(range(n))
    assert perm.tolist() == list(range(n))  # the emulator's serialization: linear thread order


@pytest.mark.parametrize("address", ["t % 3u", "t % 50u"])
def test_float_atomic_add_with_dest_rounds_sequentially(address):
    k = kernel(f"""
        kernel k(acc: f32*, v: const f32*, olds: f32*) {{
          var t: u32 = threadIdx.x
          var old: f32 = 0.0f
          old = atomic.add acc[{address}], v[t]
          olds[t] = old
        }}
    """)
    v = (np.random.default_rng(2).standard_normal(512) * 1e3).astype(np.float32)
    acc, olds = np.full(50, 0.1, np.float32), np.zeros(512, np.float32)
    emulate(k, 1, 512, {"acc": acc, "v": v, "olds": olds})
    expected, expected_olds = np.full(50, 0.1, np.float32), []
    for t in range(512):
        a = eval(address.replace("u", ""), {"t": t})
        expected_olds.append(expected[a])
        expected[a] = np.float32(expected[a] + v[t])
    np.testing.assert_array_equal(acc, expected)
    np.testing.assert_array_equal(olds, expected_olds)


def test_cas_lock_free_flag_and_exch():
    k = kernel("""
        kernel k(flag: i32*, slot: i32*, olds: i32*, swapped: i32*) {
          var t: i32 = (i32)threadIdx.x
          var old: i32 = 0
          old = atomic.cas flag[0], 0, t + 1
          olds[t] = old
          var prev: i32 = 0
          prev = atomic.exch slot[0], t
          swapped[t] = prev
        }
    """)
    flag, slot = np.zeros(1, np.int32), np.full(1, -1, np.int32)
    olds, swapped = np.zeros(64, np.int32), np.zeros(64, np.int32)
    emulate(k, 1, 64, {"flag": flag, "slot": slot, "olds": olds, "swapped": swapped})
    assert flag[0] == 1 and olds[0] == 0 and (olds[1:] == 1).all()
    assert slot[0] == 63 and swapped.tolist() == [-1] + list(range(63))


def test_atomic_inc_dec_wrap():
    k = kernel("""
        kernel k(c: u32*, inc_olds: u32*, dec_olds: u32*) {
          var t: u32 = threadIdx.x
          var old: u32 = 0u
          old = atomic.inc c[0], 4u
          inc_olds[t] = old
          old = atomic.dec c[1], 3u
          dec_olds[t] = old
        }
    """)
    c = np.array([0, 1], np.uint32)
    inc_olds, dec_olds = np.zeros(10, np.uint32), np.zeros(10, np.uint32)
    emulate(k, 1, 10, {"c": c, "inc_olds": inc_olds, "dec_olds": dec_olds})
    assert inc_olds.tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4] and c[0] == 0
    assert dec_olds.tolist() == [1, 0, 3, 2, 1, 0, 3, 2, 1, 0] and c[1] == 3


# --------------------------------------------------------------------------- warps


def _shuffle_reference(mode: str, values: list[int], arg, width: int) -> list[int]:
    out = []
    for tid, own in enumerate(values):
        lane, base = tid % 32, tid - tid % 32
        seg = lane - lane % width
        a = arg(tid)
        if mode == "idx":
            src = seg + a % width
        elif mode == "up":
            src = lane - a if lane - a >= seg else lane
        elif mode == "down":
            src = lane + a if lane + a < seg + width else lane
        else:
            src = lane ^ a if (lane ^ a) < seg + width else lane
        out.append(values[base + src])
    return out


@pytest.mark.parametrize("mode, arg_text, arg, width", [
    ("idx", "(i32)((t * 7u) % 40u)", lambda t: (t * 7) % 40, 32),
    ("idx", "3", lambda t: 3, 8),
    ("up", "3u", lambda t: 3, 16),
    ("up", "1u", lambda t: 1, 32),
    ("down", "5u", lambda t: 5, 8),
    ("down", "16u", lambda t: 16, 32),
    ("xor", "1", lambda t: 1, 32),
    ("xor", "6", lambda t: 6, 8),
    ("xor", "16", lambda t: 16, 32),
    ("xor", "4", lambda t: 4, 4),  # lane ^ 4 is a later segment for the lower half: own value
])
def test_shuffle_modes(mode, arg_text, arg, width):
    k = kernel(f"""
        kernel k(out: i32*) {{
          var t: u32 = threadIdx.x
          var v: i32 = (i32)(t * 10u + blockIdx.x)
          var r: i32 = 0
          r = shfl.{mode}({FULL_MASK}, v, {arg_text}, {width})
          out[blockIdx.x * blockDim.x + t] = r
        }}
    """)
    out = np.zeros(2 * 64, np.int32)
    emulate(k, 2, 64, {"out": out})
    for b in range(2):
        values = [t * 10 + b for t in range(64)]
        assert out[b * 64:(b + 1) * 64].tolist() == _shuffle_reference(mode, values, arg, width)


def test_shuffle_tree_reduction_within_warps():
    k = kernel(f"""
        kernel k(x: const f32*, out: f32*) {{
          var t: u32 = blockIdx.x * blockDim.x + threadIdx.x
          var v: f32 = x[t]
          var other: f32 = 0.0f
          var off: u32 = 16u
          while (off > 0u) {{
            other = shfl.down({FULL_MASK}, v, off, 32)
            v = v + other
          }} update {{
            off = off / 2u
          }}
          if (threadIdx.x % 32u == 0u) {{
            out[t / 32u] = v
          }}
        }}
    """)
    x = np.random.default_rng(4).random(256).astype(np.float32)
    out = np.zeros(8, np.float32)
    emulate(k, 2, 128, {"x": x, "out": out})
    np.testing.assert_allclose(out, x.reshape(8, 32).sum(axis=1), rtol=1e-6)


def test_votes_in_full_partial_and_divergent_warps():
    k = kernel(f"""
        kernel k(ballot: u32*, any: i32*, all: i32*, active: u32*) {{
          var t: u32 = threadIdx.x
          var b: u32 = 0u
          var a: i32 = 0
          var l: i32 = 0
          var m: u32 = 0u
          b = vote.ballot({FULL_MASK}, t % 3u == 0u)
          a = vote.any({FULL_MASK}, t == 35u)
          l = vote.all({FULL_MASK}, t < 36u)
          if (t % 32u < 5u) {{
            m = vote.activemask({FULL_MASK}, true)
          }}
          ballot[t] = b
          any[t] = a
          all[t] = l
          active[t] = m
        }}
    """)
    n = 40  # one full warp and one of 8 lanes
    outs = {"ballot": np.zeros(n, np.uint32), "any": np.zeros(n, np.int32), "all": np.zeros(n, np.int32),
            "active": np.zeros(n, np.uint32)}
    emulate(k, 1, n, outs)
    warp0 = sum(1 << lane for lane in range(32) if lane % 3 == 0)
    warp1 = sum(1 << lane for lane in range(8) if (32 + lane) % 3 == 0)
    assert outs["ballot"].tolist() == [warp0] * 32 + [warp1] * 8
    assert outs["any"].tolist() == [0] * 32 + [1] * 8
    assert outs["all"].tolist() == [1] * 32 + [0] * 8
    assert outs["active"].tolist() == [0x1F if t % 32 < 5 else 0 for t in range(n)]


def test_ballot_respects_the_mask_argument():
    k = kernel("""
        kernel k(out: u32*) {
          var b: u32 = 0u
          b = vote.ballot(255u, true)
          out[threadIdx.x] = b
        }
    """)
    out = np.zeros(32, np.uint32)
    emulate(k, 1, 32, {"out": out})
    assert (out == 255).all()


def test_error_shuffle_from_inactive_lane():
    text = f"""
        kernel k(out: f32*) {{
          var v: f32 = (f32)threadIdx.x
          if (threadIdx.x < 16u) {{
            v = shfl.down({FULL_MASK}, v, 8u, 32)
          }}
          out[threadIdx.x] = v
        }}
    """
    expect_error(lambda: emulate(kernel(text), 1, 32, {"out": np.zeros(32, np.float32)}), text, "v = shfl",
                 "shfl.down reads lane 16 of its warp, which is not executing this shuffle",
                 "thread (8, 0, 0) of block (0, 0, 0)")


def test_error_shuffle_from_returned_or_missing_lane():
    text = f"""
        kernel k(out: f32*) {{
          var v: f32 = (f32)threadIdx.x
          if (threadIdx.x >= 8u) {{
            return
          }}
          v = shfl.xor({FULL_MASK}, v, 4, 32)
          v = shfl.idx({FULL_MASK}, v, 9, 32)
          out[threadIdx.x] = v
        }}
    """
    expect_error(lambda: emulate(kernel(text), 1, 32, {"out": np.zeros(32, np.float32)}), text, "v = shfl.idx",
                 "reads lane 9 of its warp, which has returned")
    partial = f"""
        kernel k(out: f32*) {{
          var v: f32 = (f32)threadIdx.x
          v = shfl.down({FULL_MASK}, v, 1u, 32)
          out[threadIdx.x] = v
        }}
    """
    expect_error(lambda: emulate(kernel(partial), 1, 40, {"out": np.zeros(40, np.float32)}), partial, "v = shfl",
                 "reads lane 8 of its warp, which is beyond blockDim", "thread (39, 0, 0)")


# --------------------------------------------------------------------------- races


REDUCE = """
    kernel reduce(n: i32, x: const f32*, out: f32*) {
      shared s: f32[256]
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      s[threadIdx.x] = i < n ? x[i] : 0.0f
      barrier
      var stride: u32 = blockDim.x / 2u
      while (stride > 0u) {
        if (threadIdx.x < stride) {
          s[threadIdx.x] = s[threadIdx.x] + s[threadIdx.x + stride]
        }
        barrier
      } update {
        stride = stride >> 1u
      }
      if (threadIdx.x == 0u) {
        atomic.add out[0], s[0]
      }
    }
"""

TRANSPOSE = """
    kernel transpose(n: i32, a: const f32*, b: f32*) {
      shared tile: f32[16][16]
      var x: u32 = blockIdx.x * 16u + threadIdx.x
      var y: u32 = blockIdx.y * 16u + threadIdx.y
      tile[threadIdx.y][threadIdx.x] = a[y * (u32)n + x]
      barrier
      b[(blockIdx.x * 16u + threadIdx.y) * (u32)n + blockIdx.y * 16u + threadIdx.x] = tile[threadIdx.x][threadIdx.y]
    }
"""

MATMUL = """
    kernel matmul(n: i32, a: const f32*, b: const f32*, c: f32*) {
      shared as: f32[8][8]
      shared bs: f32[8][8]
      var row: i32 = (i32)(blockIdx.y * 8u + threadIdx.y)
      var col: i32 = (i32)(blockIdx.x * 8u + threadIdx.x)
      var acc: f32 = 0.0f
      for t: i32 = 0 to n / 8 step 1 {
        as[threadIdx.y][threadIdx.x] = a[row * n + t * 8 + (i32)threadIdx.x]
        bs[threadIdx.y][threadIdx.x] = b[(t * 8 + (i32)threadIdx.y) * n + col]
        barrier
        for k: i32 = 0 to 8 step 1 {
          acc = acc + as[threadIdx.y][k] * bs[k][threadIdx.x]
        }
        barrier
      }
      c[row * n + col] = acc
    }
"""


def _launch(name: str, k: Kernel) -> None:
    rng = np.random.default_rng(0)
    if name == "reduce":
        emulate(k, 4, 256, {"n": 1000, "x": rng.random(1000).astype(np.float32), "out": np.zeros(1, np.float32)})
    elif name == "transpose":
        n = 32
        emulate(k, (2, 2), (16, 16), {"n": n, "a": rng.random(n * n).astype(np.float32),
                                       "b": np.zeros(n * n, np.float32)})
    else:
        n = 16
        emulate(k, (2, 2), (8, 8), {"n": n, "a": rng.random(n * n).astype(np.float32),
                                     "b": rng.random(n * n).astype(np.float32), "c": np.zeros(n * n, np.float32)})


class _DeleteBarrier(Mutator):
    def __init__(self, which: int):
        self.which = which
        self.seen = -1

    def visit_Barrier(self, node: Barrier):
        self.seen += 1
        return None if self.seen == self.which else node


@pytest.mark.parametrize("name, text, barriers", [("reduce", REDUCE, 2), ("transpose", TRANSPOSE, 1),
                                                   ("matmul", MATMUL, 2)])
def test_every_needed_barrier_is_proved_needed(name, text, barriers):
    k = kernel(text)
    assert sum(isinstance(x, Barrier) for x in walk(k)) == barriers
    _launch(name, k)  # race-free as written
    for which in range(barriers):
        without = _DeleteBarrier(which).visit(k)
        assert sum(isinstance(x, Barrier) for x in walk(without)) == barriers - 1
        with pytest.raises(UserError, match="data race on shared memory"):
            _launch(name, without)


def test_race_report_names_both_accesses():
    text = REDUCE.replace("        barrier\n      } update", "      } update")
    err = expect_error(lambda: _launch("reduce", kernel(text)), text, "s[threadIdx.x + stride]",
                       "data race on shared memory s[", "conflicts with write by thread",
                       "of block (0, 0, 0) (with no barrier between them)")
    assert err.notes[0][0] == "the conflicting write is here"
    assert (err.notes[0][1].line, err.notes[0][1].col) == loc_of(text, "s[threadIdx.x] = s[")


def test_racy_kernel_runs_with_checks_off():
    text = REDUCE.replace("        barrier\n      } update", "      } update")
    out = np.zeros(1, np.float32)
    emulate(kernel(text), 1, 256, {"n": 256, "x": np.ones(256, np.float32), "out": out}, check_races=False)
    assert out[0] == 256.0  # lockstep execution happens to give the sequential answer


def test_race_free_patterns_are_not_reported():
    k = kernel("""
        kernel k(n: i32, x: f32*, y: f32*, total: f32*) {
          shared s: f32[64]
          var t: u32 = threadIdx.x
          var i: i32 = (i32)(blockIdx.x * blockDim.x + t)
          var stride: i32 = (i32)(gridDim.x * blockDim.x)
          while (i < n) {
            x[i] = x[i] * 2.0f
            y[i] = y[i] + x[i]
          } update {
            i = i + stride
          }
          s[t] = 1.0f
          barrier
          var neighbour: f32 = s[(t + 1u) % 64u]
          barrier
          s[t] = s[t] + neighbour
          barrier
          if (t == 0u) {
            s[0] = 5.0f
          }
          barrier
          atomic.add total[0], s[t]
          atomic.add total[1], 1.0f
        }
    """)
    n = 1000
    x, y, total = np.ones(n, np.float32), np.zeros(n, np.float32), np.zeros(2, np.float32)
    emulate(k, 3, 64, {"n": n, "x": x, "y": y, "total": total})
    assert (x == 2).all() and (y == 2).all() and total[1] == 192


def test_race_between_blocks_on_global_memory():
    text = """
        kernel k(out: f32*, halo: f32*) {
          var i: u32 = blockIdx.x * blockDim.x + threadIdx.x
          halo[i] = 1.0f
          if (i >= blockDim.x) {
            out[i] = halo[i - blockDim.x]
          }
        }
    """
    n = 3 * 32
    expect_error(lambda: emulate(kernel(text), 3, 32, {"out": np.zeros(n, np.float32), "halo": np.zeros(n, np.float32)}),
                 text, "halo[i - ", "data race on global memory halo[0]", "read by thread (0, 0, 0) of block (1, 0, 0)",
                 "conflicts with write by thread (0, 0, 0) of block (0, 0, 0)",
                 "threads of different blocks are not ordered")


def test_race_between_blocks_detected_across_chunks(monkeypatch):
    monkeypatch.setattr(launch, "LANE_BUDGET", 32)  # one block per chunk
    text = """
        kernel k(out: f32*) {
          if (threadIdx.x == 0u) {
            out[0] = (f32)blockIdx.x
          }
        }
    """
    expect_error(lambda: emulate(kernel(text), 3, 32, {"out": np.zeros(1, np.float32)}), text, "out[0]",
                 "write by thread (0, 0, 0) of block (1, 0, 0) conflicts with write by thread (0, 0, 0) of block (0, 0, 0)")


def test_chunked_launch_matches_single_chunk(monkeypatch):
    x = np.random.default_rng(5).random(1200).astype(np.float32)
    results = []
    for budget in (1 << 20, 256, 300):
        monkeypatch.setattr(launch, "LANE_BUDGET", budget)
        out = np.zeros(1, np.float32)
        emulate(kernel(REDUCE), 5, 256, {"n": 1200, "x": x, "out": out})
        results.append(out[0])
    assert results[0] == results[1] == results[2]


def test_race_in_global_memory_within_a_block_and_its_barrier_fix():
    text = """
        kernel k(y: f32*) {
          var t: u32 = threadIdx.x
          y[t] = (f32)t
          barrier
          y[(t + 1u) % blockDim.x] = y[(t + 1u) % blockDim.x] + 1.0f
        }
    """
    y = np.zeros(32, np.float32)
    emulate(kernel(text), 1, 32, {"y": y})
    assert y.tolist() == [float(t) + 1 for t in range(32)]
    racy = text.replace("          barrier\n", "")
    expect_error(lambda: emulate(kernel(racy), 1, 32, {"y": y}), racy, "y[(t + 1u)", "data race on global memory y[1]",
                 "read by thread (0, 0, 0) of block (0, 0, 0) conflicts with write by thread (1, 0, 0)", nth=1)


def test_plain_write_by_all_threads_races_with_itself():
    text = """
        kernel k(flag: i32*) {
          flag[0] = 1
        }
    """
    expect_error(lambda: emulate(kernel(text), 1, 4, {"flag": np.zeros(1, np.int32)}), text, "flag[0]",
                 "write by thread (1, 0, 0) of block (0, 0, 0) conflicts with write by thread (0, 0, 0)")


def test_atomic_and_plain_access_race_unless_ordered():
    text = """
        kernel k(c: i32*, out: i32*) {
          atomic.add c[0], 1
          barrier
          out[blockIdx.x * blockDim.x + threadIdx.x] = c[0]
        }
    """
    c, out = np.zeros(1, np.int32), np.zeros(64, np.int32)
    emulate(kernel(text), 1, 64, {"c": c, "out": out})
    assert (out == 64).all()
    # Without the barrier the read races with other threads' atomics...
    racy = text.replace("          barrier\n", "")
    expect_error(lambda: emulate(kernel(racy), 1, 64, {"c": c, "out": out}), racy, "c[0]\n",
                 "read by thread (0, 0, 0) of block (0, 0, 0) conflicts with atomics by several threads", nth=0)
    # ... and with a barrier it still races with the atomics of other blocks.
    expect_error(lambda: emulate(kernel(text), 2, 64, {"c": c, "out": np.zeros(128, np.int32)}), text, "c[0]\n",
                 "conflicts with atomics by threads of several blocks", "threads of different blocks are not ordered")


def test_aliased_pointer_arguments_share_race_records():
    text = """
        kernel shift(n: i32, x: const f32*, y: f32*) {
          var i: i32 = (i32)threadIdx.x
          if (i + 1 < n) {
            y[i] = x[i + 1]
          }
        }
    """
    k = kernel(text)
    a = np.arange(32, dtype=np.float32)
    emulate(k, 1, 32, {"n": 32, "x": a, "y": np.zeros(32, np.float32)})
    expect_error(lambda: emulate(k, 1, 32, {"n": 32, "x": a, "y": a}), text, "y[i]",
                 "data race on global memory y[1]: write by thread (1, 0, 0)", "conflicts with read by thread (0, 0, 0)")
    # Overlapping views of one array are the same memory too.
    base = np.arange(40, dtype=np.float32)
    expect_error(lambda: emulate(k, 1, 32, {"n": 32, "x": base[:36], "y": base[2:38]}), text, "y[i]",
                 "data race on global memory")
    same = np.arange(32, dtype=np.float32)
    k2 = kernel(text.replace("x[i + 1]", "x[i] * 2.0f"))
    emulate(k2, 1, 32, {"n": 32, "x": same, "y": same})  # each thread reads what it then writes
    assert same[:31].tolist() == [2.0 * t for t in range(31)]


def test_reads_across_barrier_epochs_are_ordered():
    k = kernel("""
        kernel k(out: i32*) {
          shared s: i32[32]
          var t: u32 = threadIdx.x
          s[t] = (i32)t
          barrier
          var v: i32 = s[31u - t]
          barrier
          s[t] = v * 2
          barrier
          out[t] = s[31u - t]
        }
    """)
    out = np.zeros(32, np.int32)
    emulate(k, 1, 32, {"out": out})
    assert out.tolist() == [2 * t for t in range(32)]
