"""About 150 seeded mutants of the samples through ``polypy translate`` and ``polypy grad``.

Each must meet the CLI's contract: exit 0 with the output written, or a located error
(``file:line:col: error:``, source line, caret), exit 1, no traceback and no output file left
behind; a crash or a command past the time limit fails too (tests/fuzz_driver.py runs the
commands in worker processes). The mutants are the first ones of fixed seeds, the same on every
run; ``python tests/fuzz_driver.py --count 10000 --seed 1 --jobs 2`` is the long run (docs/fuzzing.md).
"""
from __future__ import annotations

import pathlib

import pytest

from fuzz_driver import Report, Worker, fuzz

SEED = 7
TIMEOUT = 60.0  # seconds per command; a mutant of a sample takes well under one

# Mutants per mutation (deep nesting and long expressions ran into RecursionError until the
# stages got a big stack, polypy.stack).
PER_KIND = {"byte_flip": 24, "token": 30, "truncate": 16, "long_line": 8, "non_utf8": 14, "cxx": 24, "splice": 16,
            "deep_nesting": 6, "long_expression": 6}


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """One long-lived worker process for every kind's campaign (each start imports polypy and
    libclang again); a worker that crashed or hung is replaced by the driver as in a long run."""
    w = Worker(str(tmp_path_factory.mktemp("fuzz-worker")))
    yield w
    w.stop()


def _run(kind: str, count: int, tmp_path: pathlib.Path, worker: Worker) -> Report:
    return fuzz(seed=SEED, count=count, kinds=[kind], jobs=1, timeout=TIMEOUT, out=tmp_path / "failures",
                scratch=tmp_path, workers=[worker])


@pytest.mark.parametrize("kind", sorted(PER_KIND))
def test_mutants_meet_the_cli_contract(kind: str, tmp_path: pathlib.Path, worker: Worker) -> None:
    report = _run(kind, PER_KIND[kind], tmp_path, worker)
    assert report.mutants == PER_KIND[kind]
    assert report.commands > report.mutants  # grad ran too, for the kernel samples
    assert report.passed == report.commands, report.summary()


# Root causes the fuzzer found, each pinned by its smallest reproducer.

def test_a_form_feed_in_the_shown_source_line_keeps_the_caret_line_third(tmp_path: pathlib.Path, capsys) -> None:
    from polypy.driver.cli import main

    src = tmp_path / "ff.cu"
    src.write_bytes(b"__global__ void k(float *a) {\n    \x0cint x = @;\n}\n")
    assert main(["translate", str(src), "-o", str(tmp_path / "out.cpp")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"{src}:2:14: error: ")
    assert lines[1] == "     int x = @;" and lines[2] == " " * 13 + "^"
    assert not (tmp_path / "out.cpp").exists()


@pytest.mark.parametrize("text", [b"", b"__device__ float f(float x) { return x; }\n"])
def test_grad_of_a_kernel_the_file_lacks_is_a_located_error(text: bytes, tmp_path: pathlib.Path, capsys) -> None:
    from polypy.driver.cli import main

    src = tmp_path / "cut.cu"  # e.g. a file truncated before its kernel
    src.write_bytes(text)
    out = tmp_path / "g.cu"
    assert main(["grad", str(src), "--kernel", "saxpy", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{src}:1:1: error: no kernel named 'saxpy'")
    assert not out.exists()


def test_a_bool_index_is_promoted_to_int() -> None:
    """``p[i > 0]``, ``p[!c]``, ``p + (c < 3)``: C promotes the bool to int (it was left bool, and
    the IR verifier stopped translate and grad with an internal error)."""
    import numpy as np

    import polypy

    mod = polypy.compile(None, text="""
__global__ void k(float *out, const float *in, int c) {
    __shared__ float sh[4];
    float loc[2] = {0.0f, 0.0f};
    loc[0] = in[c > 0];
    loc[!c] = 2.0f;
    sh[threadIdx.x & 3] = loc[c && c];
    __syncthreads();
    out[c && c] = sh[c > 1] + *(in + (c < 3)) + loc[1];
}
""")
    inp = np.array([10, 20, 30, 40], np.float32)
    for c in (0, 1, 2, 5):
        loc = [float(inp[int(c > 0)]), 0.0]
        loc[int(not c)] = 2.0
        expected = np.zeros(2, np.float32)
        expected[int(bool(c))] = loc[int(bool(c))] + inp[int(c < 3)] + loc[1]
        out = np.zeros(2, np.float32)
        mod.k[1, 4](out, inp, np.int32(c))
        assert np.array_equal(out, expected), (c, out, expected)


@pytest.mark.parametrize("finishes", [True, False])
def test_a_timeout_is_a_hang_only_if_the_recheck_with_more_time_times_out_too(finishes: bool, tmp_path, monkeypatch):
    """On a loaded machine a command can pass --timeout and still finish: it is rechecked with
    ``HANG_RECHECK`` times the limit and judged by how it ends (listed as slow), not as a hang."""
    import fuzz_driver

    limits: list[float] = []

    def in_worker(self, argv, timeout, cwd):
        return None, ""  # every command past the limit in the long-lived worker

    def fresh(argv, timeout, cwd):
        limits.append(timeout)
        if not finishes:
            return None, ""
        pathlib.Path(argv[argv.index("-o") + 1]).write_text("// translated\n")
        return 0, ""

    monkeypatch.setattr(fuzz_driver.Worker, "run", in_worker)
    monkeypatch.setattr(fuzz_driver, "run_fresh", fresh)
    report = fuzz(seed=SEED, count=2, kinds=["byte_flip"], jobs=1, timeout=3.0, scratch=tmp_path)
    assert limits and all(t == 3.0 * fuzz_driver.HANG_RECHECK for t in limits)
    if finishes:
        assert report.failures == [] and report.passed == report.commands and len(report.slow) == report.commands
    else:
        assert report.counts["hang"] == report.commands and not report.slow
