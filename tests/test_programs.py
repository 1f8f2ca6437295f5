"""Whole CUDA programs: translated to ONE C++ file, compiled with ``c++ -O2 -fopenmp``, run.

Every program sample (``samples.spec.all_programs()``) is translated by the CLI, compiled exactly
as the user would (no extra include path), run, and its output compared with
``expected_stdout()``: text must match, numbers within the sample's ``float_rtol`` (or one unit
of the last printed digit).
"""
from __future__ import annotations

import functools
import pathlib
import re
import subprocess

import pytest

from c_support import need_compiler
from codegen.c import find_compiler
from polypy.driver.cli import main
from samples.spec import ProgramSample, all_programs

PROGRAMS = all_programs()
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def outputs_match(got: str, want: str, rtol: float) -> str | None:
    """None if ``got`` matches ``want``, else the first difference."""
    got_lines, want_lines = got.splitlines(), want.splitlines()
    if len(got_lines) != len(want_lines):
        return f"{len(got_lines)} lines printed, {len(want_lines)} expected"
    for g, w in zip(got_lines, want_lines):
        if _NUMBER.sub("#", g) != _NUMBER.sub("#", w):
            return f"line {g!r}, expected {w!r}"
        for a, b in zip(_NUMBER.findall(g), _NUMBER.findall(w)):
            x, y = float(a), float(b)
            digits = len(b.split("e")[0].split("E")[0].partition(".")[2])
            unit = 10.0 ** -digits * (10.0 ** int(b.lower().split("e")[1]) if "e" in b.lower() else 1.0)
            if abs(x - y) > max(rtol * abs(y), unit):
                return f"{a} printed, {b} expected (line {w!r})"
    return None


@functools.lru_cache(maxsize=None)
def _build(name: str, tmp: str) -> pathlib.Path:
    program = next(p for p in PROGRAMS if p.name == name)
    out = pathlib.Path(tmp) / f"{name}.cpp"
    assert main(["translate", str(program.source), "-o", str(out)]) == 0
    exe = pathlib.Path(tmp) / name
    compiler = find_compiler(cpp=True)
    result = subprocess.run([compiler, "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return exe


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("programs"))


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program_prints_what_cuda_prints(program: ProgramSample, build_dir: str) -> None:
    need_compiler(cpp=True)
    exe = _build(program.name, build_dir)
    result = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                            env={"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    problem = outputs_match(result.stdout, program.expected_stdout(), program.float_rtol)
    assert problem is None, f"{program.name}: {problem}\n--- printed:\n{result.stdout}"


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program_runs_with_one_thread(program: ProgramSample, build_dir: str) -> None:
    """Launches are synchronous and ordered: the result does not depend on the thread count."""
    need_compiler(cpp=True)
    exe = _build(program.name, build_dir)
    result = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                            env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert outputs_match(result.stdout, program.expected_stdout(), program.float_rtol) is None


def test_output_comparison() -> None:
    assert outputs_match("sum = 1.2345\n", "sum = 1.2346\n", 1e-4) is None
    assert outputs_match("sum = 1.30\n", "sum = 1.20\n", 1e-4) is not None
    assert outputs_match("n = 5\n", "m = 5\n", 1e-4) is not None
    assert outputs_match("x = 2.762447e-02\n", "x = 2.762448e-02\n", 1e-4) is None


def test_corpus_has_the_required_programs() -> None:
    assert {"vecadd_saxpy", "jacobi_solver", "power_iteration", "constant_template", "template_scale"} <= \
        {p.name for p in PROGRAMS}


HELPERS = """\
#ifndef HELPERS_CUH
#define HELPERS_CUH
__host__ __device__ inline float sq(float v) { return v * v; }
__device__ float twice(float v) { return 2.0f * v; }
__global__ void fill(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = twice(sq((float)i));
}
#endif
"""

MAIN = """\
#include <cstdio>
#include <utility>
#include "helpers.cuh"
#include "helpers.cuh"

__global__ void later(float* x, int n);

__device__ int hits;
__constant__ float bias[2];

struct Params { float scale; int n; };

__global__ void scaled(Params p, float* x)
{
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = (i < p.n) ? x[i] : 0.0f;
    __syncthreads();
    if (i < p.n) {
        x[i] = p.scale * tile[blockDim.x - 1 - threadIdx.x] + bias[1];
        atomicAdd(&hits, 1);
    }
}

int main()
{
    const int n = 100;
    float *d, *e;
    cudaMalloc(&d, n * sizeof(float));
    cudaMalloc(&e, n * sizeof(float));
    cudaMemset(e, 0, n * sizeof(float));
    cudaStream_t s;
    cudaStreamCreate(&s);
    float hb[2] = {0.5f, 0.25f};
    cudaMemcpyToSymbol(bias, hb, sizeof(hb));
    fill<<<2, 64, 0, s>>>(d, n);
    for (int k = 0; k < 2; ++k) {
        later<<<2, 64>>>(d, n);
        std::swap(d, e);
        later<<<2, 64>>>(d, n);
    }
    Params p = {2.0f, n};
    scaled<<<dim3(2), dim3(64), 64 * sizeof(float)>>>(p, d);
    int h = 0;
    cudaMemcpyFromSymbol(&h, hits, sizeof(int));
    float out[n];
    cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost);
    printf("hits = %d, sq(3) = %.1f\\n", h, sq(3.0f));
    printf("%.2f %.2f %.2f %.2f\\n", out[0], out[63], out[64], out[99]);
    cudaFree(d);
    cudaFree(e);
    return 0;
}

__global__ void later(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] + 1.0f;
}
"""


def _expected_main() -> str:
    x = [2.0 * i * i + 2.0 for i in range(100)]  # fill, then `later` twice on the same buffer
    out = []
    for i in range(100):
        block, t = divmod(i, 64)
        src = block * 64 + 63 - t
        out.append(2.0 * (x[src] if src < 100 else 0.0) + 0.25)
    return f"hits = 100, sq(3) = 9.0\n{out[0]:.2f} {out[63]:.2f} {out[64]:.2f} {out[99]:.2f}\n"


def test_program_with_user_header_streams_structs_and_forward_declarations(tmp_path: pathlib.Path) -> None:
    """A user header with a kernel and a __host__ __device__ function (inlined once although included
    twice), a kernel launched before its definition, a stream argument, dynamic shared memory, a
    struct by value, __device__ and __constant__ symbols set and read by the host, swapped pointers."""
    need_compiler(cpp=True)
    (tmp_path / "helpers.cuh").write_text(HELPERS)
    (tmp_path / "main.cu").write_text(MAIN)
    out = tmp_path / "main.cpp"
    assert main(["translate", str(tmp_path / "main.cu"), "-o", str(out)]) == 0
    text = out.read_text()
    # (fill's launcher: its launches' block shapes are all known, so it has no generic version)
    assert text.count("static inline void fill_launch(") == 1 and "twice(" not in text.replace("twice_ret", "")
    assert "__host__ __device__ inline float sq" in text
    exe = tmp_path / "main"
    build = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", "-Wall", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    assert "warning" not in build.stderr, build.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == _expected_main()
