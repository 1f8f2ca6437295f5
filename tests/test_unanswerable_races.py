"""Race questions isl cannot answer take the safe side (issue 35, "exact or refused").

An ``isl.Error`` inside a race question used to read as "no race": ``warp_races`` gave no race
(threads then ran one after another, no refusal), ``may_warp_race_arrays`` gave no array (no
lockstep lowering) and the reports said nothing. Now: where the answer decides how the code
runs, the kernel is refused with a located error (``warp_races``) or run the safe way (lockstep
for every array that may race); where it only decides a warning, the report says the check
could not be done. The isl calls are made to raise here.
"""
from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import polypy
from polypy.driver.cli import main
from polypy.errors import UserError
from polypy.poly import block_races as br
from polypy.poly import race_report as rr

# Race-free: a barrier orders the stores and the reversed reads.
REVERSE = ("__global__ void rev(int* out, const int* in) {\n"
           "  __shared__ int s[64];\n"
           "  int t = threadIdx.x;\n"
           "  s[t] = in[blockIdx.x * 64 + t];\n"
           "  __syncthreads();\n"
           "  out[blockIdx.x * 64 + t] = s[63 - t];\n}\n")

# The pre-Volta warp scan: the race is only possible to isl (a loop it only counts).
LOOP_SCAN = ("__global__ void lscan(int* out, const int* in) {\n"
             "  volatile __shared__ int v[64];\n"
             "  int t = threadIdx.x, lane = t & 31;\n"
             "  v[t] = in[t];\n"
             "  for (int off = 1; off < 32; off <<= 1) {\n"
             "    if (lane >= off) v[t] += v[t - off];\n"
             "  }\n"
             "  out[t] = v[t];\n}\n")


def _too_hard(*args, **kwargs):
    raise isl.Error("maximal number of operations exceeded (forced by the test)")


@pytest.fixture(autouse=True)
def _fresh_cache():
    br._warp_races.cache_clear()
    yield
    br._warp_races.cache_clear()


def test_unanswerable_warp_race_question_refuses_the_kernel(tmp_path, monkeypatch, capsys):
    src = tmp_path / "rev.cu"
    src.write_text(REVERSE)
    monkeypatch.setattr(br.RaceQuestion, "same_block_race", _too_hard)
    with pytest.raises(UserError) as err:
        polypy.compile(str(src)).rev[1, 64](np.zeros(64, np.int32), np.arange(64, dtype=np.int32))
    assert err.value.loc is not None and err.value.loc.file == str(src) and err.value.loc.line == 1
    assert "kernel rev" in err.value.message and "too hard" in err.value.message
    out = tmp_path / "rev.cpp"
    assert main(["translate", str(src), "-o", str(out)]) == 1
    text = capsys.readouterr().err
    assert f"{src}:1:" in text and "error: cannot check kernel rev" in text and "Traceback" not in text
    assert not out.exists()


def test_unanswerable_may_race_question_lowers_in_lockstep(tmp_path, monkeypatch):
    """The scan's race is not proved; where even "may race" cannot be asked, the array is
    lowered in lockstep anyway (exact), and the scan is right."""
    src = tmp_path / "lscan.cu"
    src.write_text(LOOP_SCAN)
    kernel = polypy.load(str(src)).kernel("lscan")
    monkeypatch.setattr(br, "_same_trips", _too_hard)
    assert br.may_warp_race_arrays(kernel) == {"v"}
    monkeypatch.setattr(br, "build_model", _too_hard)
    assert br.may_warp_race_arrays(kernel) == {"v"}
    monkeypatch.undo()
    monkeypatch.setattr(br, "_same_trips", _too_hard)
    x = np.random.default_rng(3).integers(-50, 50, 64).astype(np.int32)
    out = np.zeros_like(x)
    polypy.compile(str(src)).lscan[1, 64](out, x)
    np.testing.assert_array_equal(out, np.cumsum(x.reshape(2, 32), axis=1).reshape(-1))


def test_unanswerable_report_questions_say_they_were_not_checked(tmp_path, monkeypatch):
    src = tmp_path / "rev.cu"
    src.write_text(REVERSE)
    module = polypy.load(str(src))
    monkeypatch.setattr(rr, "race_question", _too_hard)
    monkeypatch.setattr(rr, "shared_race_warnings", lambda kernel, block=None: [])
    warnings = rr.race_warnings(module)
    assert len(warnings) == 1 and warnings[0].startswith(f"{src}:1:")
    assert "races on global memory not checked in kernel rev: the question is too hard" in warnings[0]
    monkeypatch.undo()
    monkeypatch.setattr(br, "block_races", _too_hard)
    warnings = rr.race_warnings(module)
    assert len(warnings) == 1 and warnings[0].startswith(f"{src}:1:")
    assert "races on shared memory not checked in kernel rev: the question is too hard" in warnings[0]
