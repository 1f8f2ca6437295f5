"""A translated program holds only the runtime declarations it uses (``frontend.runtime_slice``,
``codegen.c.module.runtime_header``): the graph over a small runtime of our own, and whole programs
that use little of the runtime and much of it."""
from __future__ import annotations

import pathlib
import subprocess

from c_support import need_compiler
from codegen.c import find_compiler
from codegen.c.module import _left_out
from frontend.runtime_slice import unused_runtime_lines
from polypy.driver.cli import main

RUNTIME = """\
#define RT_TWICE(x) rt_double(x)
static inline int rt_unused(int x) { return x + 1; }
static inline int rt_leaf(int x) { return x * 3; }
static inline int rt_used(int x) { return rt_leaf(x) + 1; }
static inline int rt_double(int x) { return 2 * x; }
/* Only used by rt_unused_too:
 * left out with it. */
static inline int rt_helper(int x) { return x - 1; }
static inline int rt_unused_too(int x) { return rt_helper(x); }
struct rt_counter {
  int n;
  ~rt_counter();
};
rt_counter::~rt_counter() { n = 0; }
template <class T> struct rt_kind { static const int value = 0; };
template <> struct rt_kind<float> { static const int value = 1; };
struct rt_starter { rt_starter() { rt_leaf(1); } };
static rt_starter rt_start_up;
static inline int rt_in_region(int n) {
  int s = 0;
#pragma omp parallel for reduction(+ : s)
  for (int i = 0; i < n; ++i) s += rt_parallel_leaf(i);
  return s;
}
"""


def _lines(text: str, name: str) -> set[int]:
    return {i + 1 for i, line in enumerate(text.splitlines()) if name in line}


def test_unused_declarations_are_found_through_the_graph(tmp_path: pathlib.Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir()
    # rt_parallel_leaf is used only inside an OpenMP region (no cursors there: found by its tokens).
    text = "static inline int rt_parallel_leaf(int i) { return i; }\n" + RUNTIME
    (runtime / "cuda_runtime.h").write_text(text)
    program = ('#include "cuda_runtime.h"\n'
               "int main() { rt_counter c; c.n = rt_used(1) + RT_TWICE(2) + rt_kind<float>::value"
               " + rt_in_region(3); return c.n; }\n")
    unused = unused_runtime_lines(program, str(tmp_path / "p.cpp"), runtime_dir=runtime)
    assert unused is not None
    (path, spans), = unused.items()
    gone = {line for a, b in spans for line in range(a, b + 1)}
    assert gone == _lines(text, "int rt_unused") | _lines(text, "rt_helper(int")
    for kept in ("rt_leaf(int", "rt_used(int", "rt_double(int", "~rt_counter()", "rt_kind<float>", "rt_start_up",
                 "rt_parallel_leaf(int", "RT_TWICE"):
        assert not gone & _lines(text, kept), kept
    # The comment right above a declaration left out goes with it.
    lines = text.splitlines()
    out = _left_out(lines, spans)
    assert {i + 1 for i in out} == gone | _lines(text, "Only used by") | _lines(text, "left out with it")


def test_jacobi_solver_gets_the_memory_functions_and_no_graphs(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    source = pathlib.Path(__file__).parent.parent / "samples" / "programs" / "jacobi_solver.cu"
    out = tmp_path / "jacobi.cpp"
    assert main(["translate", str(source), "-o", str(out)]) == 0
    text = out.read_text()
    assert "cudaMalloc(" in text and "cudaMemset(" in text and "cudaMemcpy(" in text
    for unused in ("cudaGraphInstantiate(", "cudaStreamCreate(", "cudaCreateTextureObject(", "cudaMallocPitch("):
        assert unused not in text, unused
    assert "float polypy_expf(float x) {" not in text  # the kernel prelude's exp: unused here
    assert len(text.splitlines()) < 1850  # 5,021 lines with the whole runtime and prelude
    _build_and_run(tmp_path, out, "jacobi 100x70, 200 iterations\nsum = 778.3144\n")


PROGRAM = r"""
#include <cstdio>
#include <cuda_runtime.h>

__global__ void add_one(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += expf(0.0f);
}

int main()
{
    const int n = 1000;
    float* d;
    cudaMalloc(&d, n * sizeof(float));
    cudaMemset(d, 0, n * sizeof(float));
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a, s);
    cudaGraph_t g = nullptr;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    add_one<<<(n + 255) / 256, 256, 0, s>>>(d, n);
    add_one<<<(n + 255) / 256, 256, 0, s>>>(d, n);
    cudaStreamEndCapture(s, &g);
    cudaGraphExec_t e = nullptr;
    cudaGraphInstantiate(&e, g, 0);
    cudaGraphLaunch(e, s);
    cudaGraphLaunch(e, s);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = -1.0f;
    cudaEventElapsedTime(&ms, a, b);
    float h[n];
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf("%g %g %s %s\n", h[0], h[n - 1], ms >= 0.0f ? "timed" : "untimed", cudaGetErrorString(cudaGetLastError()));
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    cudaFree(d);
    return 0;
}
"""


def test_a_program_using_streams_events_and_graphs_gets_them(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    (tmp_path / "graphs.cu").write_text(PROGRAM)
    out = tmp_path / "graphs.cpp"
    assert main(["translate", str(tmp_path / "graphs.cu"), "-o", str(out)]) == 0
    text = out.read_text()
    for used in ("cudaStreamCreate(", "cudaEventElapsedTime(", "cudaGraphInstantiate(", "cudaStreamBeginCapture("):
        assert used in text, used
    assert "cudaCreateTextureObject(" not in text
    assert "float polypy_expf(float x) {" in text  # the kernel's expf
    _build_and_run(tmp_path, out, "4 4 timed no error\n")


def _build_and_run(tmp_path: pathlib.Path, source: pathlib.Path, want_start: str) -> None:
    exe = tmp_path / "program"
    build = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", "-Wall", str(source), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    assert "warning" not in build.stderr, build.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(want_start), run.stdout
