"""Emitted C++ meant to be read (issue 15, item 8): thread counters numbered per nest, the
overflow test named once, removed barriers commented with the barrier report's reason; and the
code stays what it was (same results as the emulator)."""
from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

from c_support import assert_same_as_emulator, gpu_kernel
from codegen.c import emit_kernel
from codegen.c.kernel import Options
from codegen.c.readable import BarrierNote, barrier_notes, thread_axis
from polypy.driver.pipelines import lower_and_emit, to_cpu
from polypy.driver.source import load
from polypy.analysis.barrier_decision import BarrierDecision
from polypy.errors import Loc

ROOT = pathlib.Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


def _translate(name: str) -> str:
    """What ``polypy translate samples/NAME.cu --emit cpp`` writes."""
    return lower_and_emit(load(SAMPLES / f"{name}.cu"), "cpp")


def _block_function(text: str, kernel: str) -> str:
    start = text.index(f"static void {kernel}_block(")
    return text[start:text.index("\n}\n", start)]


def _nests(body: str) -> list[tuple[int, list[str]]]:
    """Per ``// file:line (threads[, nest N])`` comment: N and the counters of the loops up to
    the next such comment."""
    parts = re.split(r"// \S+ \(threads(?:, nest (\d+))?\)\n", body)
    out = []
    for number, code in zip(parts[1::2], parts[2::2]):
        out.append((int(number or 0), re.findall(r"for \(unsigned int (\w+) = ", code)))
    return out


def test_thread_counters_are_numbered_per_nest() -> None:
    text = _translate("matmul_tiled")
    body = _block_function(text, "matmul_tiled")
    nests = _nests(body)
    assert [n for n, _ in nests] == list(range(len(nests))) and len(nests) >= 4
    assert f"matmul_tiled.cu:11): {len(nests)} thread loop nest(s) per block" in text  # each one labelled
    for number, counters in nests:
        suffix = str(number) if number else ""
        # a nest split by the range of a counter (a tile's copy and its zero fill) has several
        # loops over one counter: all of them carry the nest's number
        assert counters[:3] == [f"tz{suffix}", f"ty{suffix}", f"tx{suffix}"], (number, counters)
        assert set(counters) <= {f"tz{suffix}", f"ty{suffix}", f"tx{suffix}"}, (number, counters)
    assert not re.search(r"\bt[xyz]_\d", body)  # no counter named as the lowering invented it


def test_overflow_test_is_named_once() -> None:
    body = _block_function(_translate("matmul_tiled"), "matmul_tiled")
    assert body.count("2147483647LL") == 1
    [definition] = [line for line in body.splitlines() if "2147483647LL" in line]
    assert definition.strip().startswith("const bool fits_i32 = (long long)(blockIdx.x * 16u)")
    assert definition.rstrip().endswith("// indices fit in int")
    assert "exact" in body.split(definition)[0]  # the comment above says why
    assert body.count("if (fits_i32) {") == 2  # k-tile loads and the store of C


def test_every_nest_is_labelled() -> None:
    # saxpy's fast loop starts after `tx_hi` at the same source line: its label is not merged away.
    text = _translate("saxpy")
    body = _block_function(text, "saxpy")
    nests = _nests(body)
    assert [n for n, _ in nests] == list(range(len(nests)))
    assert f"saxpy.cu:8): {len(nests)} thread loop nest(s) per block" in text


def test_overflow_test_on_a_local_stays_in_place() -> None:
    # nbody's test reads `base` (a local of the kernel): it cannot move to the function's top.
    body = _block_function(_translate("nbody_step"), "nbody_step")
    assert "if ((long long)base + (long long)blockDim.x - 1LL <= 2147483647LL" in body
    assert "const bool fits_i32" not in body or "base" not in body.split("const bool fits_i32")[1].split(";")[0]


def test_removed_barriers_are_commented_where_they_were() -> None:
    body = _block_function(_translate("backprop_layerforward"), "backprop_layerforward")
    note = ("// __syncthreads() removed (backprop_layerforward.cu:34): no conflicting accesses between the "
            "kernel entry and the barrier at line 37")
    assert body.count(note) == 1
    after = body.split(note)[1].lstrip().splitlines()[0]
    assert after.startswith("// backprop_layerforward.cu:") and int(after.split(":")[1].split()[0]) > 34
    assert "__syncthreads() removed" not in _block_function(_translate("matmul_tiled"), "matmul_tiled")


def test_barrier_of_an_inlined_function_is_noted_at_the_call_it_was_removed_from() -> None:
    # layernorm calls block_sum twice; the barrier at its line 24 is kept in the first call (the
    # second reduction reuses `red`) and removed in the second (nothing follows it).
    body = _block_function(_translate("layernorm"), "layernorm")
    note = ("// __syncthreads() removed (layernorm.cu:24): no conflicting accesses between the barrier at line 21 "
            "and the kernel exit")
    assert body.count(note) == 1
    before, after = body.split(note)
    assert before.count("= red[0];") == 2  # after the second call's `total = red[0]`
    assert after.count("= red[0];") == 0


def test_barrier_notes_keep_decisions_in_order_and_skip_other_reports() -> None:
    def decision(line: int, removed: bool) -> BarrierDecision:
        return BarrierDecision(Loc("k.cu", line, 5), removed, f"why {line}", "0")

    class Other:  # a lowering decision: no `removed`
        loc, message = Loc("k.cu", 3, 1), "thread loop"

    notes = barrier_notes([decision(9, False), Other(), decision(4, True)])
    assert notes == [BarrierNote(Loc("k.cu", 9, 5), False, "why 9"), BarrierNote(Loc("k.cu", 4, 5), True, "why 4")]


@pytest.mark.parametrize("name, axis", [("tx", "x"), ("ty_3", "y"), ("tz_12", "z"), ("tx_1_2", "x"), ("txx", None),
                                        ("tx_a", None), ("tx_", None), ("tx_hi", None), ("t", None), ("row", None)])
def test_thread_axis(name: str, axis: str | None) -> None:
    assert thread_axis(name) == axis


SHARED_TWO_NESTS = """kernel k(x: f32*, n: i32) {
  shared s: f32[64]
  s[threadIdx.x] = x[threadIdx.x]
  barrier
  var tx1: f32 = s[threadIdx.x ^ 1u]
  tx1 = tx1 * 2.0f
  x[threadIdx.x] = tx1
}"""


def test_counters_avoid_source_names_and_keep_results() -> None:
    kernel = gpu_kernel(SHARED_TWO_NESTS)
    text = emit_kernel(to_cpu(kernel), Options()).text
    body = _block_function(text, "k")
    counters = [c for _, cs in _nests(body) for c in cs]
    assert "tx1_" in counters and "tx1" not in counters  # the source's `tx1` keeps its name
    assert re.search(r"\bfloat tx1\b", body)
    x = np.arange(64, dtype=np.float32)
    assert_same_as_emulator(kernel, (1, 1, 1), (64, 1, 1), {"x": x, "n": 64})


def test_whole_program_counters_have_no_lowering_names() -> None:
    # power_iteration's version for 128 threads unrolls its reduction loop: copies of `tx_1`
    # (`tx_1_1`, `tx_1_2`...) become the counters of nests of their own.
    text = lower_and_emit(load(SAMPLES / "programs" / "power_iteration.cu"), "cpp")
    counters = re.findall(r"for \(unsigned int (\w+) = 0u; \1 < ", text)
    assert counters and all(re.fullmatch(r"t[xyz]\d*", c) for c in counters), counters
    start = text.index("static void matvec_norm2_block_b128x1x1(")
    nests = _nests(text[start:text.index("\n}\n", start)])
    assert len(nests) >= 8 and [n for n, _ in nests] == list(range(len(nests)))
