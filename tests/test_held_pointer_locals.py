"""Races through a pointer copied into a local from a ``__constant__``/``__device__`` record.

``float *p = d_bufs[blockIdx.x].a; p[0] = ...`` is a local holding the pointer's offset into the
pool, and ``p[0]`` an access of the pool at it; the race warnings read the value the local
certainly holds at the access (``polypy/poly/held_locals.py``) and judge it by the slot the
pointer was read from, as ``d_bufs[blockIdx.x].a[0]`` (tests/test_held_pointer_races.py). A local
re-pointed in a branch or a loop holds no one value there: no warning, and no false one.
"""
from __future__ import annotations

import dataclasses
import pathlib

from polypy.driver.cli import main
from polypy.ir import nodes as n
from polypy.ir.parser import parse_kernel
from polypy.ir.printer import print_kernel
from polypy.ir.types import F32
from polypy.poly.held_locals import forward_held_locals
from polypy.driver.source import load
from polypy.poly.race_report import race_warnings

PROGRAM = """#include <cstdio>
struct Bufs { float *a; float *b; };
SPACE Bufs d_bufs[4];
__global__ void k(float *out)
{
    int t = threadIdx.x;
BODY
}
int main()
{
    Bufs h[4];
    for (int i = 0; i < 4; i++) {
        cudaMalloc(&h[i].a, 64 * sizeof(float));
        cudaMalloc(&h[i].b, 64 * sizeof(float));
    }
    cudaMemcpyToSymbol(d_bufs, h, sizeof(h));
    float *out;
    cudaMalloc(&out, 4 * 64 * sizeof(float));
    k<<<4, 64>>>(out);
    cudaDeviceSynchronize();
    printf("done\\n");
    return 0;
}
"""


def _program(body: str, space: str = "__constant__") -> str:
    return PROGRAM.replace("SPACE", space).replace("BODY", body)


def _warnings(tmp_path: pathlib.Path, text: str) -> str:
    """The race warnings alone (no translation: cheaper)."""
    src = tmp_path / "local.cu"
    src.write_text(text)
    return "\n".join(race_warnings(load(str(src))))


def test_a_store_through_a_local_copy_is_a_race_in_the_report(tmp_path, capsys) -> None:
    src = tmp_path / "local.cu"
    src.write_text(_program("    float *p = d_bufs[blockIdx.x].a;\n    p[0] = t;"))
    out = tmp_path / "local.cpp"
    assert main(["translate", str(src), "--report", "-o", str(out)]) == 0
    assert out.exists()
    err = capsys.readouterr().err
    # every thread of a block stores element 0 of the pointer the local holds (line 8)
    assert f"{src}:8:5: warning: threads (tx=0, bx=0) and (tx=1, bx=0) both write " \
           "'d_bufs[blockIdx.x].a[0]' without an atomic in kernel k" in err, err
    assert "pool" not in err and "_off" not in err


def test_each_thread_its_own_element_is_no_race(tmp_path) -> None:
    body = "    float *p = d_bufs[blockIdx.x].a;\n    p[t] = t;\n    out[blockIdx.x * 64 + t] = p[t];"
    assert _warnings(tmp_path, _program(body)) == ""


def test_a_read_of_another_threads_store_through_the_local_is_a_race(tmp_path) -> None:
    # Another thread's element, no barrier between: a race; with the barrier, none.
    body = "    float *p = d_bufs[blockIdx.x].a + 2;\n    p[t] = t;\nBARRIER\n    out[blockIdx.x * 64 + t] = p[(t + 1) % 64];"
    err = _warnings(tmp_path, _program(body.replace("BARRIER", "")))
    src = tmp_path / "local.cu"
    assert f"{src}:10:32: warning: thread (tx=" in err, err
    assert "reads 'd_bufs[blockIdx.x].a[2l + (i64)(((i32)threadIdx.x + 1) % 64)]'" in err, err
    assert f"{src}:8:5: note: the store" in err
    assert _warnings(tmp_path, _program(body.replace("BARRIER", "    __syncthreads();"))) == ""


def test_a_local_assigned_the_same_slot_again_still_holds_it(tmp_path) -> None:
    # Reassigned, in a branch too, only from the same slot: one pointer at the store.
    body = ("    float *p;\n    p = d_bufs[blockIdx.x].a;\n    if (t > 3) p = d_bufs[blockIdx.x].a;\n"
            "    p[1] = t;")
    err = _warnings(tmp_path, _program(body))
    assert f"{tmp_path / 'local.cu'}:10:5: warning: threads (tx=" in err, err
    assert "both write 'd_bufs[blockIdx.x].a[1l]'" in err


def test_a_local_repointed_in_sequence_holds_each_pointer_in_turn(tmp_path) -> None:
    # a[t]: each thread its own element; then b[0]: every thread the same one.
    body = "    float *p = d_bufs[blockIdx.x].a;\n    p[t] = t;\n    p = d_bufs[blockIdx.x].b;\n    p[0] = t;"
    err = _warnings(tmp_path, _program(body))
    assert err.count("warning:") == 1, err
    assert f"{tmp_path / 'local.cu'}:10:5: warning: threads (tx=0, bx=0) and (tx=1, bx=0) both write " \
           "'d_bufs[blockIdx.x].b[0]'" in err, err


def test_a_local_repointed_in_a_branch_is_not_judged(tmp_path) -> None:
    # Even threads write a[t / 2], odd ones b[t / 2]: no race unless the host made a and b one
    # pointer, so no warning (taking either pointer for both would be a false one).
    body = "    float *p = d_bufs[blockIdx.x].a;\n    if (t % 2) p = d_bufs[blockIdx.x].b;\n    p[t / 2] = t;"
    assert _warnings(tmp_path, _program(body)) == ""


def test_a_local_moved_in_a_loop_is_not_judged(tmp_path) -> None:
    # Thread t writes a[t] (the pointer moved t times): no race.
    body = "    float *p = d_bufs[blockIdx.x].a;\n    for (int i = 0; i < t; i++) p++;\n    p[0] = t;"
    assert _warnings(tmp_path, _program(body)) == ""


# The rewrite itself (golden IR): the value each local certainly holds, in the pool accesses' indices.
BEFORE = """kernel k(pool: f32*, base: u64, extent: u64, m: i32*, n: i32) {
  constant v: u64[8] in d
  var j: i32 = (i32)blockIdx.x
  var p: i64 = (i64)(v[j * 2] - base) / 4l
  pool[p] = 1.0f
  var q: i64 = p + 2l
  pool[q + (i64)threadIdx.x] = pool[p]
  if (threadIdx.x > 3u) {
    p = (i64)(v[j * 2] - base) / 4l
    q = (i64)(v[j * 2 + 1] - base) / 4l
  }
  pool[p] = 3.0f
  pool[q] = 4.0f
  for i: i32 = 0 to n step 1 {
    pool[p] = 5.0f
    q = q + 1l
  }
  pool[p + q] = 6.0f
  var r: i64 = p + (i64)m[0]
  var s: i64 = 0l
  s = (i64)(v[j * 2] - base) / 4l + s
  pool[r + s] = 7.0f
  j = 0
  pool[p] = 8.0f
}
"""

AFTER = """kernel k(pool: f32*, base: u64, extent: u64, m: i32*, n: i32) {
  constant v: u64[8] in d
  var j: i32 = (i32)blockIdx.x
  var p: i64 = (i64)(v[j * 2] - base) / 4l
  pool[(i64)(v[j * 2] - base) / 4l] = 1.0f
  var q: i64 = p + 2l
  pool[(i64)(v[j * 2] - base) / 4l + 2l + (i64)threadIdx.x] = pool[(i64)(v[j * 2] - base) / 4l]
  if (threadIdx.x > 3u) {
    p = (i64)(v[j * 2] - base) / 4l
    q = (i64)(v[j * 2 + 1] - base) / 4l
  }
  pool[(i64)(v[j * 2] - base) / 4l] = 3.0f
  pool[q] = 4.0f
  for i: i32 = 0 to n step 1 {
    pool[(i64)(v[j * 2] - base) / 4l] = 5.0f
    q = q + 1l
  }
  pool[(i64)(v[j * 2] - base) / 4l + q] = 6.0f
  var r: i64 = p + (i64)m[0]
  var s: i64 = 0l
  s = (i64)(v[j * 2] - base) / 4l + s
  pool[r + s] = 7.0f
  j = 0
  pool[p] = 8.0f
}
"""


def test_the_rewrite_keeps_exactly_the_values_a_local_certainly_holds() -> None:
    # p: one slot, also where a branch assigns it the same again; q: another slot in one branch
    # only (no value after the if), moved in a loop; r reads memory a kernel can write (m); s
    # reads itself; j, the slot's index, assigned again: p no longer holds d's slot j there.
    kernel = parse_kernel(BEFORE)
    slots = n.HeldPointerSlots("pool", "base", "extent", F32, "d", 16, 4, ((0, ".a"), (8, ".b")))
    kernel = dataclasses.replace(kernel, held_pointers=(slots,))
    assert print_kernel(forward_held_locals(kernel)) == AFTER


def test_a_local_copy_from_a_device_record_is_a_race(tmp_path) -> None:
    err = _warnings(tmp_path, _program("    float *p = d_bufs[blockIdx.x].a;\n    p[0] = t;", "__device__"))
    assert f"{tmp_path / 'local.cu'}:8:5: warning: threads (tx=0, bx=0) and (tx=1, bx=0) both write " \
           "'d_bufs[blockIdx.x].a[0]'" in err, err
