"""CUDA graphs (issue 41 item 4): stream capture across streams, graphs made by hand, instantiate,
launch in dependency order, relaunch, clone, update; and what stays refused.

The programs (``tests/programs/graphs/``) are our own; what they print is what CUDA gives (the
values follow from the CUDA Runtime API reference: capture records instead of running, a graph
launch runs each node after its dependencies, an executable graph is a snapshot of its graph).
Each runs with compiled kernels and with kernels run by polypy's reference emulator.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from c_support import need_compiler

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs" / "graphs"


def _polypy(*args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


CAPTURE_EXPECTED = """\
before 0
capturing 1 id 1
forked 1
ended 0 ran 0
nodes 4 roots 1
calls 100 h0 1 h40 1 last_seen 1
child_calls 102 f 2 2 3 2 3 2 3 2 3 2 2 2 2 2 2 2 2 2
unjoined cudaErrorStreamCaptureUnjoined 1
sync_in_capture cudaErrorStreamCaptureUnsupported 2 cudaErrorStreamCaptureInvalidated
modes 0 2
legacy cudaErrorStreamCaptureUnsupported
"""

# Node order: the fill, then host a and b (ready at once, in the order they were made), the child
# graph (the captured kernel: 2 * 3 + 1 = 7), the copies, the join, the host node that reads the
# copied h[5] (prints its last digit), and c, which an edge added later put after it.
EXPLICIT_EXPECTED = """\
nodes 9 roots 1 child_type 4
order ab7c h 7 7 e 7
relaunched ab7cab7cab7cab7cab7c h 7
snapshot ab7c h 7
update cudaSuccess 0 ab1c h 21
exec_set ab9c h 9
topology cudaErrorGraphExecUpdateFailure 2
clone ab1c h 21
cycle cudaErrorInvalidValue
"""


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["compiled", "emulated"])
def test_stream_capture_records_forks_joins_and_replays(mode: tuple[str, ...]) -> None:
    """Captured launches, a copy and a host function run only when the graph is launched: 100
    launches compute ((x + 1) * 3) 100 times on the forked half and x + 1 on the other, the host
    node sees each launch's copied result; a fill, a 2-D copy and a launch of an executable graph
    (a child graph node) captured; capture status and id; work forked into another stream
    and never joined back is cudaErrorStreamCaptureUnjoined; waiting for a capturing stream fails
    and invalidates the capture; the legacy stream cannot capture."""
    need_compiler(cpp=True)
    r = _polypy("run", str(PROGRAMS / "capture.cu"), *mode)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == CAPTURE_EXPECTED


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["compiled", "emulated"])
def test_graphs_made_by_hand_run_in_dependency_order(mode: tuple[str, ...]) -> None:
    """Memset, 1-D and 3-D memcpy, host, empty and child-graph nodes run after their dependencies
    (host nodes record the order); relaunching repeats it; the executable graph is a snapshot;
    cudaGraphExecUpdate (both signatures) takes new parameters of a graph of the same shape and
    refuses a changed topology; cudaGraphExecMemsetNodeSetParams; a clone; a cycle."""
    need_compiler(cpp=True)
    r = _polypy("run", str(PROGRAMS / "explicit.cu"), *mode)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == EXPLICIT_EXPECTED


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["compiled", "emulated"])
def test_kernel_nodes_made_by_hand(mode: tuple[str, ...]) -> None:
    """``(void*)axpy`` as cudaKernelNodeParams::func: two kernel nodes in a chain, the parameter
    values copied when each node is made (2 then 3: y = 5 x), cudaGraphExecKernelNodeSetParams
    on the executable graph (a = 10: y = 5x + 2x + 10x); a pointer that is no kernel and packed
    parameters are cudaErrorInvalidValue."""
    need_compiler(cpp=True)
    r = _polypy("run", str(PROGRAMS / "kernel_nodes.cu"), *mode)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == "5 495\n17 1683\ncudaErrorInvalidValue cudaErrorInvalidValue\n"


REFUSED = {
    "get_params.cu": ("cudaGraphNode_t node = 0;\n  cudaKernelNodeParams p;\n  cudaGraphKernelNodeGetParams(node, &p);",
                      "6:3: error: 'cudaGraphKernelNodeGetParams' is unavailable: CUDA graphs: reading a kernel node's "
                      "parameters back (cudaGraphKernelNodeGetParams) is not supported by polypy"),
    "event_node.cu": ("cudaGraphNode_t node;\n  cudaGraphAddEventRecordNode(&node, 0, 0, 0, 0);",
                      "5:3: error: 'cudaGraphAddEventRecordNode' is unavailable: CUDA graphs: event nodes "
                      "(cudaGraphAddEventRecordNode) is not supported by polypy"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_graph_calls_not_implemented_are_located_errors(tmp_path: pathlib.Path, name: str) -> None:
    body, message = REFUSED[name]
    src = tmp_path / name
    src.write_text("#include <cstdio>\ntemplate <class T> __global__ void t(T* x) { x[0] = 1; }\nint main() {\n  " + body
                   + "\n  return 0;\n}\n")
    out = tmp_path / "out.cpp"
    r = _polypy("translate", str(src), "-o", str(out))
    assert r.returncode == 1
    assert f"{name}:{message}" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()


def test_launch_given_a_stream_converts_arguments_as_a_direct_call(tmp_path: pathlib.Path) -> None:
    """A launch with a stream goes through the runtime (to be captured when the stream captures):
    its arguments still convert to the kernel's parameter types as in a direct call (NULL to a
    pointer, an int to a float, a double to an int), evaluated once, at the launch."""
    need_compiler(cpp=True)
    src = tmp_path / "conv.cu"
    src.write_text("#include <cstdio>\n"
                   "__global__ void k(float* x, float v, const int* unused, int n) {\n"
                   "  int i = threadIdx.x; if (i < n) x[i] = v + 1.0f; }\n"
                   "int main() {\n"
                   "  float* d; cudaMalloc(&d, 32 * sizeof(float)); cudaMemset(d, 0, 32 * sizeof(float));\n"
                   "  cudaStream_t s; cudaStreamCreate(&s);\n"
                   "  int calls = 0;\n"
                   "  k<<<1, 32, 0, s>>>(d, 2 + calls++, NULL, 16.7);\n"
                   "  float h[32]; cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);\n"
                   "  printf(\"%g %g %g %d\\n\", h[0], h[15], h[16], calls);\n}\n")
    r = _polypy("run", str(src), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == "3 3 0 1\n"


def test_launches_through_the_host_stub_are_captured(tmp_path: pathlib.Path) -> None:
    """cudaLaunchKernel and a launch through a kernel pointer into a capturing stream become
    kernel nodes holding the argument values (nothing runs before the graph is launched); each
    launch of the graph runs both, in order. (A top-level `const` parameter is no part of the
    stub's type: the binder takes the types as given.)"""
    need_compiler(cpp=True)
    src = tmp_path / "stub_capture.cu"
    src.write_text("#include <cstdio>\n"
                   "__global__ void add(float* y, const float a) { y[threadIdx.x] += a; }\n"
                   "__global__ void twice(float* y) { y[threadIdx.x] *= 2.0f; }\n"
                   "int main() {\n"
                   "  float* d; cudaMalloc(&d, 4 * sizeof(float)); cudaMemset(d, 0, 4 * sizeof(float));\n"
                   "  cudaStream_t s; cudaStreamCreate(&s);\n"
                   "  void (*k)(float*) = twice;\n"
                   "  float a = 1.0f; void* args[2] = {&d, &a};\n"
                   "  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);\n"
                   "  cudaError_t e = cudaLaunchKernel((void*)add, dim3(1), dim3(4), args, 0, s);\n"
                   "  a = 100.0f;  /* the node holds 1 */\n"
                   "  k<<<1, 4, 0, s>>>(d);\n"
                   "  cudaGraph_t g; cudaStreamEndCapture(s, &g);\n"
                   "  size_t count = 0; cudaGraphGetNodes(g, 0, &count);\n"
                   "  float h[4]; cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);\n"
                   "  printf(\"%s nodes %zu before %g\\n\", cudaGetErrorName(e), count, h[0]);\n"
                   "  cudaGraphExec_t x; cudaGraphInstantiate(&x, g, 0);\n"
                   "  cudaGraphLaunch(x, s); cudaGraphLaunch(x, s); cudaStreamSynchronize(s);\n"
                   "  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);\n"
                   "  printf(\"after %g %g\\n\", h[0], h[3]);\n}\n")
    r = _polypy("run", str(src), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == "cudaSuccess nodes 2 before 0\nafter 6 6\n"  # ((0 + 1) * 2 + 1) * 2
