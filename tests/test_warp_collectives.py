"""Volta's warp collectives (issue 36, item 6): ``__reduce_{add,min,max,and,or,xor}_sync``,
``__match_any_sync``, ``__match_all_sync`` on the full warp, and ``__activemask`` in divergent
code, against a NumPy reference through the emulator, the LLVM JIT and the C backend; the
reductions also with partial and run-time masks (issue 41, the reduction sample); the match
functions refuse other masks at the call.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import polypy
from c_support import copy_args, run_c, run_emulated
from polypy.errors import UserError

COLLECTIVES = r"""
__global__ void w(const int* x, const float* f, unsigned* out, int* sout, int* preds) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[t];
  unsigned* o = out + 8 * t;
  o[0] = __reduce_add_sync(0xffffffff, (unsigned)v);
  o[1] = __reduce_min_sync(0xffffffff, (unsigned)v);
  o[2] = __reduce_max_sync(0xffffffff, (unsigned)v);
  o[3] = __reduce_and_sync(0xffffffff, (unsigned)v | 0x10u);
  o[4] = __reduce_or_sync(0xffffffff, (unsigned)v);
  o[5] = __reduce_xor_sync(0xffffffff, (unsigned)v);
  o[6] = __match_any_sync(0xffffffff, v % 3);
  o[7] = __match_any_sync(0xffffffffu, f[t]);
  sout[3 * t] = __reduce_add_sync(0xffffffff, v);
  sout[3 * t + 1] = __reduce_min_sync(0xffffffff, v);
  sout[3 * t + 2] = __reduce_max_sync(0xffffffff, v);
  int p;
  unsigned m = __match_all_sync(0xffffffff, (long long)(v / 1000), &p);
  preds[2 * t] = p;
  preds[2 * t + 1] = (int)m;
  if (threadIdx.x % 3 == 1) preds[2 * t + 1] ^= (int)__activemask();
}
"""

WARPS = 4


def _inputs() -> dict:
    rng = np.random.default_rng(7)
    t = 32 * WARPS
    x = rng.integers(-3000, 3000, t).astype(np.int32)
    x[:32] = rng.integers(0x40000000, 0x7FFFFFFF, 32)  # sums that wrap
    x[32:64] = 5000 + (x[32:64] % 7)  # every lane of warp 1 has v / 1000 == 5
    x[64] = np.int32(-(1 << 31))  # INT_MIN in warp 2
    f = np.array([0.0, -0.0, np.nan, 1.0, 1.0, -np.inf] * 22, np.float32)[:t]
    return {"x": x, "f": f, "out": np.zeros(8 * t, np.uint32), "sout": np.zeros(3 * t, np.int32),
            "preds": np.zeros(2 * t, np.int32)}


def _reference(args: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, f = args["x"], args["f"]
    out = np.zeros((x.size, 8), np.uint32)
    sout = np.zeros((x.size, 3), np.int32)
    preds = np.zeros((x.size, 2), np.int32)
    for w in range(WARPS):
        lanes = slice(32 * w, 32 * w + 32)
        v = [int(a) for a in x[lanes]]
        u = [a & 0xFFFFFFFF for a in v]
        mod3 = [int(np.fmod(a, 3)) for a in v]  # C's % truncates
        bits = [int(b) for b in f[lanes].view(np.uint32)]
        div = [int(a / 1000) for a in v]  # C's / truncates
        same = all(d == div[0] for d in div)
        for i in range(32):
            t = 32 * w + i
            out[t, :6] = [sum(u) & 0xFFFFFFFF, min(u), max(u), functools.reduce(lambda a, b: a & b, [a | 0x10 for a in u]),
                          functools.reduce(lambda a, b: a | b, u), functools.reduce(lambda a, b: a ^ b, u)]
            out[t, 6] = sum(1 << j for j in range(32) if mod3[j] == mod3[i])
            out[t, 7] = sum(1 << j for j in range(32) if bits[j] == bits[i])  # bits: -0.0 != 0.0, NaN == NaN
            total = sum(v) & 0xFFFFFFFF
            sout[t] = [total - (1 << 32) if total >> 31 else total, min(v), max(v)]
            mask = 0xFFFFFFFF if same else 0
            first = 32 * w % 64  # threadIdx.x of the warp's lane 0 (blocks of 64 threads)
            if (first + i) % 3 == 1:
                mask ^= sum(1 << j for j in range(32) if (first + j) % 3 == 1)  # the lanes inside the branch
            preds[t] = [int(same), mask - (1 << 32) if mask >> 31 else mask]
    return out, sout, preds


@pytest.mark.parametrize("way", ["emulator", "llvm", "c"])
def test_collectives_match_numpy(tmp_path, way: str) -> None:
    path = tmp_path / "w.cu"
    path.write_text(COLLECTIVES)
    args = _inputs()
    if way == "llvm":
        out = copy_args(args)
        polypy.compile(str(path)).w[WARPS // 2, 64](*out.values())
    else:
        kernel = polypy.load(str(path)).kernel("w")
        out = (run_emulated if way == "emulator" else run_c)(kernel, WARPS // 2, 64, args)
    want_out, want_sout, want_preds = _reference(args)
    np.testing.assert_array_equal(out["out"].reshape(-1, 8), want_out)
    np.testing.assert_array_equal(out["sout"].reshape(-1, 3), want_sout)
    np.testing.assert_array_equal(out["preds"].reshape(-1, 2), want_preds)


PARTIAL = r"""
__global__ void p(const int* x, int* out, unsigned s) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[t];
  int* o = out + 4 * t;
  unsigned first = threadIdx.x & ~31u;  // the warp's lanes that exist: all 32, or the block's last ones
  unsigned existing = blockDim.x - first < 32 ? blockDim.x - first : 32;
  unsigned warp = 0xffffffffu >> (32 - existing);  // as the reduction sample computes its mask
  o[0] = __reduce_add_sync(warp, v);
  if (v & 1) {
    o[1] = (int)__reduce_max_sync(__activemask(), (unsigned)v);  // the odd lanes only
  }
  if ((threadIdx.x & 31) < 32 - s && (threadIdx.x & 31) < existing) {
    o[2] = __reduce_min_sync((0xffffffffu >> s) & warp, v);  // a mask from an argument
  }
  if ((threadIdx.x & 31) >= 8 && (threadIdx.x & 31) < 12 && (threadIdx.x & 31) < existing) {
    o[3] = __reduce_xor_sync(0xf00 & warp, v);  // a partial constant
  }
}
"""


def _partial_reference(x: np.ndarray, block: int, s: int) -> np.ndarray:
    out = np.zeros((x.size, 4), np.int32)
    for b0 in range(0, x.size, block):
        for w0 in range(b0, b0 + block, 32):
            ids = list(range(w0, min(w0 + 32, b0 + block)))
            v = {t: int(x[t]) for t in ids}
            total = sum(v.values()) & 0xFFFFFFFF
            odd = [v[t] & 0xFFFFFFFF for t in ids if v[t] & 1]
            low = [v[t] for t in ids if t - w0 < 32 - s]
            mid = [v[t] for t in ids if 8 <= t - w0 < 12]
            for t in ids:
                out[t, 0] = total - (1 << 32) if total >> 31 else total
                if v[t] & 1:
                    out[t, 1] = np.uint32(max(odd)).view(np.int32)
                if t - w0 < 32 - s:
                    out[t, 2] = min(low)
                if 8 <= t - w0 < 12:
                    out[t, 3] = functools.reduce(lambda a, b: a ^ b, mid)
    return out


@pytest.mark.parametrize("shape", [(2, 48), (3, 80)])
@pytest.mark.parametrize("way", ["emulator", "llvm", "c"])
def test_reductions_over_partial_and_run_time_masks(tmp_path, way: str, shape: tuple[int, int]) -> None:
    path = tmp_path / "p.cu"
    path.write_text(PARTIAL)
    blocks, threads = shape
    rng = np.random.default_rng(threads)
    x = rng.integers(-(1 << 31), (1 << 31) - 1, blocks * threads).astype(np.int32)
    x[::5] = -7  # odd and negative: max compares unsigned, min signed
    s = 5 if threads == 48 else 19
    args = {"x": x, "out": np.zeros(4 * x.size, np.int32), "s": np.uint32(s)}
    if way == "llvm":
        out = copy_args(args)
        polypy.compile(str(path)).p[blocks, threads](*out.values())
    else:
        kernel = polypy.load(str(path)).kernel("p")
        out = (run_emulated if way == "emulator" else run_c)(kernel, blocks, threads, args)
    np.testing.assert_array_equal(out["out"].reshape(-1, 4), _partial_reference(x, threads, s))


def test_a_mask_lane_that_does_not_arrive_is_a_fault_in_the_emulator(tmp_path) -> None:
    path = tmp_path / "f.cu"
    path.write_text("__global__ void f(int* x) {\n  if (threadIdx.x < 16)\n"
                    "    x[threadIdx.x] = __reduce_add_sync(0x1ffff, x[threadIdx.x]);\n}\n")
    kernel = polypy.load(str(path)).kernel("f")
    with pytest.raises(Exception, match="reads lane 16 of its warp, which is not executing this shuffle"):
        run_emulated(kernel, 1, 32, {"x": np.arange(32, dtype=np.int32)})


@pytest.mark.parametrize("call", ["__match_all_sync(0xffff, v, &p)", "__match_any_sync(m, v)",
                                  "__match_any_sync(__activemask(), (unsigned)v)"])
def test_other_masks_are_refused_at_the_mask(tmp_path, call: str) -> None:
    path = tmp_path / "m.cu"
    path.write_text("__global__ void k(int* x, unsigned m) {\n  int v = x[threadIdx.x], p;\n"
                    f"  x[threadIdx.x] = {call};\n}}\n")
    with pytest.raises(UserError, match="full-warp mask 0xffffffff only") as info:
        polypy.load(str(path))
    assert info.value.loc is not None and info.value.loc.line == 3
    assert info.value.loc.col == 20 + call.index("(") + 1  # the mask argument


BLOCK_VOTES = r"""
__global__ void b(const int* x, int* out, int* flags) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[t];
  int* o = out + 4 * t;
  flags[t] = v % 7;
  o[0] = __syncthreads_count(v > 0);
  o[1] = __syncthreads_or(v > 90) != 0;
  o[2] = __syncthreads_and(v > -95) != 0;
  o[3] = flags[(threadIdx.x + 1) % blockDim.x + blockIdx.x * blockDim.x];  // written before the vote
  for (int r = 0; r < 2; ++r)  // again in a loop: the votes' shared memory is used once more
    o[0] += __syncthreads_count(v % (r + 2) == 0) * 1000 * (r + 1);
}
"""


@pytest.mark.parametrize("shape", [(3, 48), (2, 128), (1, 1)])
@pytest.mark.parametrize("way", ["emulator", "llvm", "c"])
def test_block_votes_count_and_combine_the_whole_block(tmp_path, way: str, shape: tuple[int, int]) -> None:
    # __syncthreads_count/and/or were refused ("not supported").
    path = tmp_path / "b.cu"
    path.write_text(BLOCK_VOTES)
    blocks, threads = shape
    x = np.random.default_rng(threads).integers(-100, 100, blocks * threads).astype(np.int32)
    x[threads // 2] = 99
    args = {"x": x, "out": np.zeros(4 * x.size, np.int32), "flags": np.zeros(x.size, np.int32)}
    if way == "llvm":
        out = copy_args(args)
        polypy.compile(str(path)).b[blocks, threads](*out.values())
    else:
        kernel = polypy.load(str(path)).kernel("b")
        out = (run_emulated if way == "emulator" else run_c)(kernel, blocks, threads, args)
    want = np.zeros((x.size, 4), np.int32)
    for b0 in range(0, x.size, threads):
        v = x[b0:b0 + threads]
        want[b0:b0 + threads, 0] = (v > 0).sum() + 1000 * (v % 2 == 0).sum() + 2000 * (v % 3 == 0).sum()
        want[b0:b0 + threads, 1] = (v > 90).any()
        want[b0:b0 + threads, 2] = (v > -95).all()
        want[b0:b0 + threads, 3] = np.roll(np.fmod(v, 7), -1)
    np.testing.assert_array_equal(out["out"].reshape(-1, 4), want)
