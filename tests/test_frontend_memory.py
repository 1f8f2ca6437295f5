"""The frontend's caches keyed by translation unit keep only the last few units: a unit's answers
hold its cursors and types, which hold the unit, so a weak mapping keyed by the unit never let one
go (every module ever loaded stayed in memory: the suite's workers grew past 11 GB)."""
from __future__ import annotations

import gc

import clang.cindex as ci

import polypy

SOURCE = ("__global__ void k{0}(float* x, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "  if (i < n) x[i] = x[i] * {0}.0f + 1.0f; }}\n")


def _live_units() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, ci.TranslationUnit))


def test_loaded_modules_do_not_keep_their_translation_units() -> None:
    before = _live_units()
    for i in range(30):
        polypy.load(None, text=SOURCE.format(i))
    assert _live_units() - before <= 20  # the bounded caches (frontend.function_scan, frontend.bases)


def test_per_unit_cache_keeps_the_units_used_last() -> None:
    from frontend.unit_cache import PerUnit
    cache = PerUnit(kept=2)
    a, b, c = object(), object(), object()  # stand-ins for units: any hashable key
    cache.of(a)["x"] = 1
    cache.of(b)["y"] = 2
    assert cache.of(a) == {"x": 1}  # a used again: b is now the oldest
    cache.of(c)
    assert len(cache) == 2
    assert cache.of(a) == {"x": 1}
    assert cache.of(b) == {}  # b was dropped: a new, empty dict
