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


# The 32-bit-safety branch of the fast thread loops (tighten_thread_bounds) where a launch can
# take it: a grid known at compile time decides the test (polypy.passes.within_grid), and the
# version is guarded by that grid (GridWithin); an unknown grid, or one whose indices may pass
# INT_MAX, keeps both branches.
GRIDS = {
    "narrow": ("const int grid = 1;", True),
    "wide": ("const int grid = 4096;", True),
    "unknown": ("int grid = (int)strlen(argv[0]) > 0 ? 1 : 2;", False),
    "huge": ("const int grid = 1 << 25;", False),  # (2^25 - 1) * 128 + 127 > INT_MAX: not for every block
}


def _block_function(text: str, name: str) -> str:
    start = text.index(f"static void {name}(")
    return text[start:text.index("\n}\n", start)]


@pytest.mark.parametrize("case", sorted(GRIDS))
def test_the_32_bit_branch_only_where_a_launch_can_take_it(case: str, tmp_path: pathlib.Path) -> None:
    grid, decided = GRIDS[case]
    (tmp_path / "p.cu").write_text(PROGRAM.replace("GRID_DECL", grid).replace("VALUE_USE", "").replace("BLOCK", "128"))
    out = tmp_path / "p.cpp"
    assert main(["translate", str(tmp_path / "p.cu"), "-o", str(out)]) == 0
    text = out.read_text()
    block = _block_function(text, "fill_block_b128x1x1")
    assert ("fits_i32" not in block) == decided, block
    assert block.count("for (unsigned int tx") == (1 if decided else 2), block
    # The version is for the known grid: the launcher says so, and aborts on any other.
    limit = {"narrow": 1, "wide": 4096}.get(case)
    assert (f"grid.x <= {limit}u && grid.y <= 1u && grid.z <= 1u" in text) == decided
    if case == "wide":
        need_compiler(cpp=True)
        exe = tmp_path / "p"
        build = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", "-Wall", str(out), "-o", str(exe), "-lm"],
                               capture_output=True, text=True)
        assert build.returncode == 0, build.stderr[-3000:]
        run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and run.stdout == "5050.0\n", run.stdout + run.stderr


def test_a_grid_decides_only_what_holds_for_every_block() -> None:
    from polypy.ir import nodes as n
    from polypy.ir.types import I64, U32
    from polypy.passes.within_grid import decided

    def fits(block: int) -> n.Expr:  # (i64)(blockIdx.x * block) + (block - 1) <= INT_MAX
        first = n.Cast(I64, n.Binary("mul", n.BlockIdx(0), n.Const(block, U32)))
        return n.Binary("le", n.Binary("add", first, n.Const(block - 1, I64)), n.Const(2**31 - 1, I64))

    assert decided(fits(16), (7, 5, 1)) is True
    assert decided(fits(128), (1 << 24, 1, 1)) is True  # the last block ends at INT_MAX exactly
    assert decided(fits(128), (1 << 25, 1, 1)) is None  # some blocks fit, some do not
    assert decided(fits(256), (1 << 25, 1, 1)) is None  # blockIdx.x * 256u wraps in 32 bits: unknown
    # A parameter, a thread counter: unknown whatever the grid.
    assert decided(n.Binary("lt", n.BlockIdx(0), n.Var("n", U32)), (1, 1, 1)) is None
    assert decided(n.Binary("lt", n.BlockIdx(1), n.GridDim(1)), (3, 3, 1)) is None
    assert decided(n.Binary("ge", n.BlockIdx(1), n.Const(3, U32)), (3, 3, 1)) is False
