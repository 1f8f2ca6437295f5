"""A whole program gets no kernel version that none of its launches can select: a coarse-block
version for a grid too narrow to use it is not made where every launch's grid is known
(``polypy.coarsening.selectable_only``), nor the generic version where every launch's block shape
is known (``codegen.c.module``); where a shape is unknown or the kernel can be launched another
way (named as a value), they are. A kernel's host stub is emitted only where the program may
call it (``codegen.c.module``)."""
from __future__ import annotations

import pathlib
import subprocess

import pytest

from c_support import need_compiler
from codegen.c import find_compiler
from polypy.driver.cli import main

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void fill(float* u, int n)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x < n)
        u[x] = 1.0f + x;
}

int main(int argc, char** argv)
{
    GRID_DECL
    const int n = 100;
    float* d;
    cudaMalloc((void**)&d, 4096 * 128 * sizeof(float));
    cudaMemset(d, 0, 4096 * 128 * sizeof(float));
    VALUE_USE
    fill<<<grid, BLOCK>>>(d, n);
    float h[100];
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += h[i];
    printf("%.1f\n", s);
    cudaFree(d);
    return 0;
}
"""

CASES = {
    # grid, block, the kernel named as a value, whether the coarse version is made
    "narrow": ("const int grid = 1;", "128", "", False),
    "wide": ("const int grid = 4096;", "128", "", True),
    "unknown": ("int grid = (int)strlen(argv[0]) > 0 ? 1 : 2;", "128", "", True),
    "as_value": ("const int grid = 1;", "128", "void (*f)(float*, int) = fill; (void)f;", True),
    "unknown_block": ("const int grid = 1;", "(argc > 7 ? 64 : 128)", "", False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_coarse_version_only_where_a_launch_can_select_it(case: str, tmp_path: pathlib.Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    grid, block, value, made = CASES[case]
    (tmp_path / "p.cu").write_text(PROGRAM.replace("GRID_DECL", grid).replace("VALUE_USE", value).replace("BLOCK", block))
    out = tmp_path / "p.cpp"
    assert main(["translate", str(tmp_path / "p.cu"), "-o", str(out), "--report"]) == 0
    text = out.read_text()
    report = capsys.readouterr().err + capsys.readouterr().out
    assert ("static void fill_block_b128x1x1(" in text) == (case != "unknown_block")
    assert ("fill_block_b128x1x1_c" in text) == made, case
    # The generic version only where a launch may have another block shape.
    assert ("static void fill_block(" in text) == (case in ("as_value", "unknown_block")), case
    # The host stub (and the runtime's registry of stubs) only where the program may call it.
    assert ("static polypy_rt_kernel_entry polypy_rt_entry_fill(" in text) == (case == "as_value"), case
    assert ("struct polypy_rt_kernel_entry {" in text) == (case == "as_value"), case
    if not made and case != "unknown_block":  # (no specialized version at all there)
        assert "coarse blocks of 32x1x1 are never selected: its grid (1,1,1) has fewer than 8 of them" in report
    if case in ("narrow", "wide", "as_value", "unknown_block"):
        need_compiler(cpp=True)
        exe = tmp_path / "p"
        build = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", "-Wall", str(out), "-o", str(exe), "-lm"],
                               capture_output=True, text=True)
        assert build.returncode == 0, build.stderr[-3000:]
        run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and run.stdout == "5050.0\n", run.stdout + run.stderr
