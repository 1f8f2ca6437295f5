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


# Sizes in pages of 4 KiB (each allocation is 16 KiB: 4 pages). The first graph's two allocations
# are unordered with each other's frees (8 pages); its executable graph keeps their memory
# (used) until destroyed, then it is reserved until trimmed; a graph that reuses a freed address
# holds one allocation's memory; an allocation the graph keeps stays used after cudaFree until a
# trim; the captured graph's third allocation reuses the first's address (8 pages).
MEMORY_EXPECTED = """\
start used 0 high 0 reserved 0 high 0
distinct 1
instantiate cudaSuccess second cudaErrorNotSupported
instantiated used 0 high 0 reserved 0 high 0
launch cudaSuccess b[3] 3 b[4095] 4095
launched used 8 high 8 reserved 8 high 8
relaunch cudaSuccess
relaunched used 8 high 8 reserved 8 high 8
destroyed used 0 high 8 reserved 8 high 8
trimmed used 0 high 8 reserved 0 high 8
reused 1 free_twice cudaErrorInvalidValue
reuse used 4 high 8 reserved 4 high 8
kept[10] 5 live_relaunch cudaErrorInvalidValue
kept used 4 high 8 reserved 4 high 8
cudaFree cudaSuccess again cudaErrorInvalidDevicePointer
freed used 4 high 8 reserved 4 high 8
relaunch cudaSuccess cudaFreeAsync cudaSuccess
free_graph cudaSuccess twice cudaErrorInvalidValue
auto_free cudaSuccess
trimmed used 0 high 8 reserved 0 high 8
reset used 0 high 0 reserved 0 high 0
capture_end cudaSuccess nodes 10 reused 1
captured z[5] 60
captured used 8 high 8 reserved 8 high 8
plain_free cudaErrorStreamCaptureUnsupported end cudaErrorStreamCaptureInvalidated
"""


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["compiled", "emulated"])
def test_memory_nodes_allocations_frees_capture_and_attributes(mode: tuple[str, ...]) -> None:
    """Allocation node + kernel + free node (b = 2 a, a = 0.5 i); one executable graph at a time
    for a graph with memory nodes; the graph memory attributes after launches, destruction and
    cudaDeviceGraphMemTrim; an address reused after a free node it depends on, a second free
    refused; an allocation the graph keeps: readable after the launch, a relaunch while it is
    live fails, freed by cudaFree (twice: an error), cudaFreeAsync, another graph's free node,
    cudaGraphInstantiateFlagAutoFreeOnLaunch; high-water marks reset; cudaMallocAsync and
    cudaFreeAsync captured (z = 4 x = 12 i); cudaFreeAsync of cudaMalloc's memory in a capture
    is unsupported."""
    need_compiler(cpp=True)
    r = _run("memory_nodes.cu", *mode)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == MEMORY_EXPECTED


CONDITIONAL_EXPECTED = """\
instantiate cudaSuccess
if_else 121
if 33
capture_to_graph cudaSuccess cudaSuccess
while 4 trips left 0
while 7 trips left 0
switch 312
bad_size cudaErrorInvalidValue
driver 1
"""


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["compiled", "emulated"])
def test_conditional_nodes_set_by_kernels(mode: tuple[str, ...]) -> None:
    """cudaGraphAddNode with cudaGraphNodeParams: IF/ELSE decided by a kernel's
    cudaGraphSetConditional (9, 3, 6: then, else, then: 1 2 1), IF alone (0, 7, 2, 8: taken
    twice), WHILE with default value 1 and cudaGraphCondAssignDefault whose body (captured with
    cudaStreamBeginCaptureToGraph) counts down from 4 and 7 and clears the condition at zero,
    SWITCH of 3 bodies (2, 0, 3, 1: bodies 2, 0, none, 1); a WHILE of size 2 is refused."""
    need_compiler(cpp=True)
    r = _run("conditional.cu", *mode)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == CONDITIONAL_EXPECTED


def test_condition_handle_used_otherwise_is_a_located_error(tmp_path: pathlib.Path) -> None:
    """A kernel's handle is the address of its condition here: any use but as
    cudaGraphSetConditional's first argument is refused at the use."""
    src = tmp_path / "handle.cu"
    src.write_text("__global__ void k(int* out, cudaGraphConditionalHandle h) {\n"
                   "  out[0] = (int)h;\n}\n"
                   "int main() { return 0; }\n")
    out = tmp_path / "out.cpp"
    r = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1
    assert "handle.cu:2:17: error: the conditional handle 'h' is only supported as the first argument of " \
           "cudaGraphSetConditional" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()


def test_set_conditional_through_the_python_api(tmp_path: pathlib.Path) -> None:
    """A kernel's handle parameter is a pointer to the condition (one unsigned int): launched from
    Python, the condition is an array of one uint32 that cudaGraphSetConditional writes."""
    import numpy as np

    import polypy

    src = tmp_path / "decide.cu"
    src.write_text("__global__ void decide(const int* x, cudaGraphConditionalHandle h) {\n"
                   "  if (threadIdx.x == 0) cudaGraphSetConditional(h, x[0] > 5 ? 7 : 0);\n}\n")
    mod = polypy.compile(str(src))
    cond = np.full(1, 99, np.uint32)
    seen = []
    for v in (9, 3, 6):
        mod.decide[1, 32](np.array([v], np.int32), cond)
        seen.append(int(cond[0]))
    assert seen == [7, 0, 7]
