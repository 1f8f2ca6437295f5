"""CUDA's SIMD-in-word intrinsics (``__vadd4``, ``__vsub2``, ``__vabsdiffu4``, ``__vcmpeq4``...,
``frontend/lower/simd_intrinsics.py``), checked lane by lane against NumPy on every backend (the
reference emulator, the LLVM JIT, the C backend). They were refused ("use of undeclared
identifier '__vadd4'")."""
from __future__ import annotations

import numpy as np
import pytest

from frontend.lower.simd_intrinsics import SIMD_INTRINSICS
from tests.c_support import WAYS, need_compiler, run_way

NAMES = sorted(SIMD_INTRINSICS)
SOURCE = ("__global__ void simd(const unsigned *a, const unsigned *b, unsigned *out, int n) {\n"
          "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n"
          "  unsigned x = a[i], y = b[i];\n"
          + "".join(f"  out[i * {len(NAMES)} + {j}] = {name}(x{', y' if SIMD_INTRINSICS[name] == 2 else ''});\n"
                    for j, name in enumerate(NAMES))
          + "}\n")


def _lanes(words: np.ndarray, lanes: int, signed: bool) -> np.ndarray:
    width = 32 // lanes
    parts = np.stack([(words.astype(np.int64) >> (width * k)) & ((1 << width) - 1) for k in range(lanes)])
    if signed:
        parts = np.where(parts >= 1 << (width - 1), parts - (1 << width), parts)
    return parts


def reference(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``name`` on every pair of words, lane by lane in int64 (the CUDA Math API's definitions)."""
    lanes = int(name[-1])
    width = 32 // lanes
    lo, hi, top = -(1 << (width - 1)), (1 << (width - 1)) - 1, (1 << width) - 1
    op = name[3:-1]
    compare = op.startswith(("cmp", "set"))
    relation = op[3:] if compare else ""
    signed = op in ("addss", "subss", "absdiffs", "maxs", "mins", "sads", "abs", "absss", "neg", "negss") or \
        relation in ("ges", "gts", "les", "lts")
    x, y = _lanes(a, lanes, signed), _lanes(b, lanes, signed)
    results = {
        "add": lambda: x + y, "sub": lambda: x - y,
        "addss": lambda: np.clip(x + y, lo, hi), "subss": lambda: np.clip(x - y, lo, hi),
        "addus": lambda: np.clip(x + y, 0, top), "subus": lambda: np.clip(x - y, 0, top),
        "absdiffs": lambda: np.abs(x - y), "absdiffu": lambda: np.abs(x - y),
        "avgu": lambda: (x + y + 1) // 2, "haddu": lambda: (x + y) // 2,
        "maxs": lambda: np.maximum(x, y), "maxu": lambda: np.maximum(x, y),
        "mins": lambda: np.minimum(x, y), "minu": lambda: np.minimum(x, y),
        "abs": lambda: np.abs(x), "absss": lambda: np.minimum(np.abs(x), hi),
        "neg": lambda: -x, "negss": lambda: np.clip(-x, lo, hi),
    }
    if op in ("sads", "sadu"):
        return np.abs(x - y).sum(axis=0).astype(np.uint32)
    if compare:
        held = {"eq": x == y, "ne": x != y, "ge": x >= y, "gt": x > y, "le": x <= y, "lt": x < y}[relation[:2]]
        lane = np.where(held, top if op.startswith("cmp") else 1, 0)
    else:
        lane = results[op]()
    lane = lane & top
    return sum(lane[k] << (width * k) for k in range(lanes)).astype(np.uint32)


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    corners = np.array([0, 0xFFFFFFFF, 0x80808080, 0x7F7F7F7F, 0x80007FFF, 0x00FF00FF, 0x01017F80, 0xFF00FF80],
                       dtype=np.uint32)
    a = np.concatenate([np.repeat(corners, len(corners)), rng.integers(0, 2**32, 200, dtype=np.uint32)])
    b = np.concatenate([np.tile(corners, len(corners)), rng.integers(0, 2**32, 200, dtype=np.uint32)])
    return a.astype(np.uint32), b.astype(np.uint32)


def test_reference_matches_hand_computed_lanes():
    # The reference itself, on lanes worked out by hand.
    a = np.array([0x7F80FF01], dtype=np.uint32)
    b = np.array([0x01800102], dtype=np.uint32)
    assert reference("__vadd4", a, b)[0] == 0x80000003
    assert reference("__vaddss4", a, b)[0] == 0x7F800003  # 127+1 -> 127, -128-128 -> -128, -1+1 = 0
    assert reference("__vaddus4", a, b)[0] == 0x80FFFF03
    assert reference("__vsub2", a, b)[0] == 0x7E00FDFF
    assert reference("__vabsdiffu4", a, b)[0] == 0x7E00FE01
    assert reference("__vcmpeq4", a, b)[0] == 0x00FF0000
    assert reference("__vsetgtu4", a, b)[0] == 0x01000100
    assert reference("__vsads4", a, b)[0] == 126 + 0 + 2 + 1
    assert reference("__vabsss4", np.array([0x80FF7F00], dtype=np.uint32), b)[0] == 0x7F017F00


@pytest.mark.parametrize("way", WAYS)
def test_simd_intrinsics_lane_by_lane(way):
    if way == "c":
        need_compiler()
    a, b = _inputs()
    n = len(a)
    out = np.zeros(n * len(NAMES), dtype=np.uint32)
    got = run_way(SOURCE, "simd", (n + 127) // 128, 128, {"a": a, "b": b, "out": out, "n": np.int32(n)}, way)
    table = got["out"].reshape(n, len(NAMES))
    for j, name in enumerate(NAMES):
        expected = reference(name, a, b)
        bad = np.nonzero(table[:, j] != expected)[0]
        assert bad.size == 0, (name, hex(a[bad[0]]), hex(b[bad[0]]), hex(table[bad[0], j]), hex(expected[bad[0]]))
