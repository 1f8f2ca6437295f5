"""A whole program's launchers (``codegen/c/kernel.py``, ``c_launcher.j2``): a kernel with one
version and no default has no dispatcher, and its launcher hands the grid to the prelude's
``polypy_run_blocks`` (the team or the calling thread alone, the worker loop); the parallel
regions a program starts are those the launchers wrote out by hand before."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

from c_support import need_compiler
from codegen.c import find_compiler
from polypy.driver.cli import main

PROGRAM = r"""
#include <cstdio>
#include <cuda_runtime.h>

__global__ void twice(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 2.0f;
}

int main()
{
    const int n = 64 * 256;
    float* h = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; ++i) h[i] = (float)i;
    float* d;
    cudaMalloc((void**)&d, n * sizeof(float));
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    for (int launch = 0; launch < 3; ++launch) twice<<<64, 256>>>(d, n);
    twice<<<1, 256>>>(d, 256);  // one block: on the calling thread, no parallel region
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    printf("%g %g %g\n", h[1], h[256], h[n - 1]);
    cudaFree(d);
    free(h);
    return 0;
}
"""

# Counts the parallel regions: GOMP_parallel (what GCC makes of `omp parallel`) defined in the
# program, ahead of libgomp's, which it then calls; the count printed at exit.
COUNTER = r"""
#include <dlfcn.h>
#include <stdio.h>
static int regions;
void GOMP_parallel(void (*fn)(void*), void* data, unsigned threads, unsigned flags) {
  void (*real)(void (*)(void*), void*, unsigned, unsigned) =
      (void (*)(void (*)(void*), void*, unsigned, unsigned))dlsym(RTLD_NEXT, "GOMP_parallel");
  regions++;
  real(fn, data, threads, flags);
}
__attribute__((destructor)) static void report(void) { fprintf(stderr, "regions %d\n", regions); }
"""


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    need_compiler(cpp=True)
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on this machine (the count replaces libgomp's GOMP_parallel)")
    directory = tmp_path_factory.mktemp("counter")
    (directory / "counter.c").write_text(COUNTER)
    subprocess.run([gcc, "-O2", "-c", str(directory / "counter.c"), "-o", str(directory / "counter.o")],
                   check=True, capture_output=True, text=True)
    return directory / "counter.o"


def _translate_and_build(tmp_path: pathlib.Path, counter: pathlib.Path, threads: int) -> tuple[str, pathlib.Path]:
    source = tmp_path / "twice.cu"
    source.write_text(PROGRAM)
    out = tmp_path / "twice.cpp"
    assert main(["translate", str(source), "-o", str(out), "--threads", str(threads)]) == 0
    exe = tmp_path / "twice"
    # Every grid counts as large enough for a team (the small-grid rule would run this loop-free
    # kernel's 16,384 threads alone).
    build = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", "-Wall", "-DPOLYPY_RT_SMALL_GRID_WORK=1",
                            str(out), str(counter), "-o", str(exe), "-ldl", "-lm"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    assert "warning" not in build.stderr, build.stderr[-3000:]
    return out.read_text(), exe


def _run(exe: pathlib.Path, omp_threads: str) -> tuple[str, int]:
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OMP_NUM_THREADS": omp_threads})
    assert done.returncode == 0, done.stderr
    return done.stdout, int(done.stderr.split("regions ")[-1])


def test_one_version_no_dispatcher_and_the_team_decided_by_the_runtime(tmp_path: pathlib.Path,
                                                                        counter: pathlib.Path) -> None:
    text, exe = _translate_and_build(tmp_path, counter, 0)
    # The only version's launcher is the kernel's: the guard first, then polypy_run_blocks.
    assert "twice_launch_b" not in text and text.count("static inline void twice_launch(") == 1
    assert "polypy_run_blocks<1u, 1u, 1u, 0>(grid, block, " in text
    assert "none of the program's launches has" in text
    # element 1: doubled four times (the one-block launch too); 256 and the last, three times
    want = "16 2048 131064\n"
    # One thread: no team is made at all; two: one region per launch of 64 blocks, none for one block.
    assert _run(exe, "1") == (want, 0)
    assert _run(exe, "2") == (want, 3)


def test_a_fixed_team_size_makes_a_region_even_with_one_openmp_thread(tmp_path: pathlib.Path,
                                                                      counter: pathlib.Path) -> None:
    text, exe = _translate_and_build(tmp_path, counter, 2)
    assert "polypy_run_blocks<1u, 1u, 1u, 2>(grid, block, " in text
    assert _run(exe, "1") == ("16 2048 131064\n", 3)
