"""CUDA graphs completed (issue 41 item 4): memory nodes (allocation and free nodes made by hand
and by capturing cudaMallocAsync/cudaFreeAsync, the graph memory attributes, trimming),
conditional nodes (IF, IF/ELSE, WHILE, SWITCH, set by kernels with cudaGraphSetConditional),
and the loop shape of simpleCudaGraphs' final reduction.

The programs (``tests/programs/graphs/``) are our own; the values they print follow from the CUDA
Runtime API reference and programming guide (graph allocations have fixed addresses, are valid
until freed by a free node, cudaFree or cudaFreeAsync; a relaunch while the previous launch's
allocation is live fails; conditional bodies run per the handle's value at the node).
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from c_support import need_compiler

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs" / "graphs"


def _run(name: str, *mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(PROGRAMS / name), *mode],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["compiled", "emulated"])
def test_shuffle_loop_under_a_branch_after_a_conditional_shared_step(mode: tuple[str, ...]) -> None:
    """simpleCudaGraphs' reduceFinal shape: ``for (int step = 16; step > 0; step /= 2)`` of
    shuffles under ``if (rank < 32)``, after ``if (blockDim.x >= 128 && rank < 64) part[rank] =
    acc = acc + part[rank + 64]`` (which the warp lockstep lowering rewrites): the counter stays
    a local of the branch. Both launches sum all 1000 elements (0.5 * i): 249750."""
    need_compiler(cpp=True)
    r = _run("warp_loop.cu", *mode)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == "249750.0 249750.0\n"
