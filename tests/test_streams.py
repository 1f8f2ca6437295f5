"""Streams whose work runs while the host goes on (issue 41): a created stream's launches, copies,
fills, host functions, callbacks and event records run in issue order on its worker thread;
synchronizing waits, querying polls; the legacy default stream waits for blocking streams, not for
non-blocking ones; cudaStreamWaitEvent orders two streams.

The program (``tests/programs/runtime/streams.cu``, our own) holds a stream with a host function
that waits for a gate the host opens after issuing more work, so every check below depends on the
host going on while the stream's work waits (with work that completed at once, the queries would
say cudaSuccess and the gate would be found closed).
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from c_support import need_compiler

PROGRAM = pathlib.Path(__file__).resolve().parent / "programs" / "runtime" / "streams.cu"

EXPECTED = """\
pending cudaErrorNotReady cudaErrorNotReady cudaErrorNotReady released 1
ordered 12 12 cudaSuccess cudaSuccess
joined 27 27 cudaErrorNotReady
callbacks 3 1 2 3 value 113
legacy 1113 1113 cudaErrorNotReady 1114
errors cudaErrorInvalidConfiguration cudaSuccess cudaSuccess 1115 wait_bad cudaErrorInvalidValue
"""


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["compiled", "emulated"])
def test_streams_run_concurrently_with_the_host_in_stream_order(mode: tuple[str, ...]) -> None:
    """Lines: work pending behind the gate (stream and event queries and the elapsed time are
    cudaErrorNotReady, the host function saw the gate open); the stream's fill, two kernels of 16
    blocks and copy in order (0 + 5 + 7); a second stream's kernel after the first stream's event
    (2 * 13 + 1, pending while the gate is shut); a host function, kernel, copy, callback and host
    function in issue order, the callback seeing the copy (113); a synchronous copy after a
    blocking stream's work (1113) but not after a non-blocking stream's (still 1113, that stream
    pending, 1114 once synchronized); an invalid configuration on a stream is the launch's error,
    a destroyed stream's work still runs (1115), a wait with flags is cudaErrorInvalidValue."""
    need_compiler(cpp=True)
    r = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(PROGRAM), *mode], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == EXPECTED
