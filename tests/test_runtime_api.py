"""The CUDA runtime API a whole program expects (issue 41): device properties and attributes,
errors, streams and callbacks, events, occupancy, pools, pitched 3-D memory, peer access, pointer
attributes, limits, versions, profiler; the samples' helper headers; refusals.

Programs are our own (``tests/programs/runtime/`` or written into ``tmp_path``), translated and
run with ``polypy run``; what they print is compared with what CUDA gives on a machine with one
device (the values the CUDA Runtime API reference documents).
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

from c_support import need_compiler

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs" / "runtime"


def _polypy(*args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


API_EXPECTED = """\
props 0
props_bad_device cudaErrorInvalidDevice
attributes_agree 1 numbering 75 81 115
attribute_bad cudaErrorInvalidValue
resident 1 blocks x 1024 threads
set_device_1 cudaErrorInvalidDevice
peek cudaErrorInvalidDevice
last cudaErrorInvalidDevice
cleared cudaSuccess
launch_2048 cudaErrorInvalidConfiguration sync cudaSuccess
launch_grid_y cudaErrorInvalidConfiguration
stream_flags 1 callbacks 2 order 11 7
priorities 0 0 destroy 0 destroy_null cudaErrorInvalidResourceHandle
elapsed_unrecorded cudaErrorInvalidResourceHandle
elapsed cudaSuccess 1 no_timing cudaErrorInvalidResourceHandle
occupancy_256 1 occupancy_2048 0 potential 1024 grid_is_sms 1 limited 96
pool threshold 1048576 used 4000 after_free 0 after_cudaFree 0 high 4000
pitch 64 rows_padded 1 copy3d 1 row1 12
peer 0 enable cudaErrorInvalidDevice peer_copy 1 1
pointer device 1 host 1
limit 16777216 versions 1 1 profiler 0 0
unified 0 0 cudaErrorInvalidDevice
bus 0000:00:00.0 0 flags 12 2 stack 1024 access 3 stream 0 0 1
"""


def test_runtime_api_behaves_as_cuda_on_one_device() -> None:
    """Attributes read the properties (CUDA's numbering; an unknown one is cudaErrorInvalidValue);
    errors are recorded, peeked, returned once; an invalid launch configuration runs nothing and is
    the launch's error, not the next synchronization's; a host function and a stream callback run
    after the stream's kernel and copy (the host function sees the copied result: 10 + 1), in
    order; events time only when both were recorded with timing; occupancy is one resident block
    of up to 1024 threads per multiprocessor (potential block size 1024, 96 under a limit of 100,
    minimum grid = multiprocessors); the default pool counts its used bytes; cudaMemcpy3D moves a
    box through padded rows (row 1 of depth 0 holds 10, 11, 12...); one device has no peer."""
    need_compiler(cpp=True)
    for mode in ((), ("--emulate",)):  # compiled kernels; kernels run by the reference emulator
        r = _polypy("run", str(PROGRAMS / "api.cu"), *mode)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout == API_EXPECTED, mode


def test_refused_runtime_calls_are_located_errors(tmp_path: pathlib.Path) -> None:
    """CUDA graphs' memory nodes, a surface object's description: `file:line:col: error:` naming
    the call, exit 1, no output. (cudaFuncGetAttributes, cudaLaunchKernel and a kernel's address
    work on its host stub: tests/test_separate_compilation.py; surface objects:
    tests/test_textures.py; graphs: tests/test_graphs.py.)"""
    cases = {
        "graph.cu": ("cudaGraph_t g;\n  cudaGraphDebugDotPrint(g, \"g.dot\", 0);", "5:3: error: "
                     "'cudaGraphDebugDotPrint' is unavailable: CUDA graphs: DOT output (cudaGraphDebugDotPrint) "
                     "is not supported by polypy"),
        "surface.cu": ("cudaResourceDesc r;\n  cudaGetSurfaceObjectResourceDesc(&r, 0);",
                       "5:3: error: 'cudaGetSurfaceObjectResourceDesc' is unavailable: surface objects "
                       "(cudaGetSurfaceObjectResourceDesc) is not supported by polypy"),
    }
    for name, (body, message) in cases.items():
        src = tmp_path / name
        src.write_text("#include <cuda_runtime.h>\n__global__ void k(int* a) { a[threadIdx.x] = 1; }\n"
                       f"int main() {{\n  {body}\n  return 0;\n}}\n")
        out = tmp_path / (name + ".cpp")
        r = _polypy("translate", str(src), "-o", str(out))
        assert r.returncode == 1, name
        assert f"{src}:{message}" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and not out.exists()


HELPER_PROGRAM = r"""
#include <helper_cuda.h>
#include <helper_functions.h>
__global__ void twice(float* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] *= 2.0f;
}
int main(int argc, char** argv) {
  int dev = findCudaDevice(argc, (const char**)argv);
  float h[4] = {1, 2, 3, 4}, *d;
  checkCudaErrors(cudaMalloc(&d, sizeof h));
  checkCudaErrors(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
  twice<<<1, 4>>>(d, 4);
  getLastCudaError("twice");
  checkCudaErrors(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  printf("%s dev %d init %d %d caps %d %d sum %g\n", WHICH_HELPER, dev, gpuDeviceInit(0), gpuDeviceInit(1),
         (int)checkCudaCapabilities(7, 0), (int)checkCudaCapabilities(99, 0), h[0] + h[1] + h[2] + h[3]);
  return checkCudaCapabilities(99, 0) ? 0 : EXIT_WAIVED;
}
"""


def test_polypy_helper_cuda_is_the_fallback(tmp_path: pathlib.Path) -> None:
    """Without -I, polypy's helper_cuda.h: gpuDeviceInit (device 1 does not exist: -1),
    checkCudaCapabilities against the reported 8.0, EXIT_WAIVED (2) as the exit status."""
    need_compiler(cpp=True)
    src = tmp_path / "helpers.cu"
    src.write_text('#define WHICH_HELPER "polypy"\n' + HELPER_PROGRAM)
    r = _polypy("run", str(src))
    assert r.returncode == 2, r.stderr[-3000:]
    assert r.stdout == "polypy dev 0 init 0 -1 caps 1 0 sum 20\n"
    assert "device 1 requested, but there are 1 device(s)" in r.stderr


def test_user_helper_headers_are_never_shadowed(tmp_path: pathlib.Path) -> None:
    """A program's own helper_cuda.h and helper_functions.h, found through -I, are the ones used
    (here: ours of the same names, written for the test, that call the runtime API the samples'
    headers call: cudaDeviceGetAttribute with the compute-capability attributes)."""
    need_compiler(cpp=True)
    inc = tmp_path / "common"
    inc.mkdir()
    (inc / "helper_cuda.h").write_text(r"""
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define WHICH_HELPER "user"
#define EXIT_WAIVED 2
#define checkCudaErrors(x) do { if ((x) != cudaSuccess) { printf("user check failed\n"); exit(1); } } while (0)
#define getLastCudaError(m) checkCudaErrors(cudaGetLastError())
static int findCudaDevice(int, const char**) { return 0; }
static int gpuDeviceInit(int d) { int n = 0; cudaGetDeviceCount(&n); return d < n ? 40 + d : -40; }
static bool checkCudaCapabilities(int major, int minor) {
  int a = 0, b = 0;
  checkCudaErrors(cudaDeviceGetAttribute(&a, cudaDevAttrComputeCapabilityMajor, 0));
  checkCudaErrors(cudaDeviceGetAttribute(&b, cudaDevAttrComputeCapabilityMinor, 0));
  return a * 10 + b >= major * 10 + minor;
}
""")
    (inc / "helper_functions.h").write_text('#pragma once\n#include "helper_cuda.h"\n')
    src = tmp_path / "helpers.cu"
    src.write_text(HELPER_PROGRAM)
    r = _polypy("run", str(src), "-I", str(inc))
    assert r.returncode == 2, r.stderr[-3000:]
    assert r.stdout == "user dev 0 init 40 -40 caps 1 0 sum 20\n"



MANAGED = r"""
#include <cstdio>
__managed__ int counter;
__device__ __managed__ float acc[4];
__global__ void k(const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicAdd(&counter, 1);
    atomicAdd(&acc[i % 4], x[i]);
  }
}
int main() {
  counter = 5;
  for (int j = 0; j < 4; ++j) acc[j] = 0.5f * j;
  float* x;
  cudaMallocManaged(&x, 100 * sizeof(float));
  for (int i = 0; i < 100; ++i) x[i] = (float)i;
  k<<<4, 32>>>(x, 100);
  cudaDeviceSynchronize();
  printf("%d %g %g %g %g\n", counter, acc[0], acc[1], acc[2], acc[3]);
  return 0;
}
"""


def test_managed_variables_are_device_memory_the_host_uses(tmp_path: pathlib.Path) -> None:
    # `__managed__ int counter;` was "a host variable [that] cannot be used in device code".
    need_compiler(cpp=True)
    src = tmp_path / "managed.cu"
    src.write_text(MANAGED)
    sums = [sum(range(j, 100, 4)) + 0.5 * j for j in range(4)]
    for mode in ((), ("--emulate",)):
        r = _polypy("run", str(src), *mode, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout == "105 " + " ".join("%g" % s for s in sums) + "\n", mode
