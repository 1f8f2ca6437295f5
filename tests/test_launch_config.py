"""Launch configurations of whole programs evaluated at compile time (``frontend.launch_shapes``),
the versions compiled for them (specialized, coarsened) and ``polypy translate --report``.

The shapes only choose which versions exist: the translated launcher compares the launch's
actual block with each specialized shape at run time, so a shape polypy cannot know runs the
generic version and still gives the CUDA answer -- the sample ``launch_config`` checks that
against NumPy (``test_programs``, ``test_run_programs``), and so does the -D run here.
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest

from c_support import need_compiler
from codegen.c import find_compiler
from frontend.parse import parse_file
from polypy.driver.cli import main
from samples.spec import all_programs

SAMPLE = next(p for p in all_programs() if p.name == "launch_config")

FORMS = r"""
#include <cuda_runtime.h>
#define BLOCK_SIZE 16
#ifndef FROM_D
#define FROM_D 8
#endif
const int kConst = 64;
constexpr int kExpr = 32;
__global__ void k(float* a) { a[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
void byref(dim3& d);
void byconst(const dim3& d);
void run(float* a, dim3 param, int c) {
  k<<<1, 128>>>(a);                                         // @literal (128,1,1)
  k<<<1, dim3(32, 8)>>>(a);                                 // @dim3 (32,8,1)
  k<<<1, kConst>>>(a);                                      // @const (64,1,1)
  k<<<1, kExpr * 2>>>(a);                                   // @constexpr (64,1,1)
  k<<<1, FROM_D>>>(a);                                      // @minusD (4,1,1)
  dim3 threads(BLOCK_SIZE, BLOCK_SIZE);
  k<<<1, threads>>>(a);                                     // @macros (16,16,1)
  dim3 copy = threads;
  copy.z = 2;
  byconst(copy);
  k<<<1, copy>>>(a);                                        // @copy (16,16,2)
  int bs;
  bs = 96;
  unsigned half = bs / 2;
  k<<<1, dim3(half, threads.y)>>>(a);                       // @ints (48,16,1)
  dim3 m;
  m.x = BLOCK_SIZE * 2;
  m.y = 2;
  k<<<1, m>>>(a);                                           // @members (32,2,1)
  dim3 r(1);
  r = dim3(256);
  k<<<1, r>>>(a);                                           // @reassigned (256,1,1)
  dim3 inloop(8);
  for (int i = 0; i < 3; ++i) {
    inloop.x = 64;
    k<<<1, inloop>>>(a);                                    // @loop-before (64,1,1)
  }
  k<<<1, param>>>(a);                                       // @parameter None parameter
  dim3 cond(16);
  if (c) cond.x = 32;
  k<<<1, cond>>>(a);                                        // @if None does not run before every launch
  dim3 after(16);
  for (int i = 0; i < 3; ++i) {
    k<<<1, after>>>(a);                                     // @after None does not run before every launch
    after.x = 8;
  }
  dim3 grown(16);
  for (int i = 0; i < 3; ++i) {
    k<<<1, grown>>>(a);                                     // @compound None modified
    grown.x *= 2;
  }
  dim3 ref(16);
  byref(ref);
  k<<<1, ref>>>(a);                                         // @byref None passed by reference to byref
  dim3 addr(16);
  dim3* p = &addr;
  k<<<1, addr>>>(a);                                        // @address None address taken
  dim3 bound(16);
  unsigned& bx = bound.x;
  k<<<1, bound>>>(a);                                       // @reference None modified
  dim3 runtime(16);
  runtime.x = c;
  k<<<1, runtime>>>(a);                                     // @runtime None is not a constant
  int counter = 16;
  counter++;
  k<<<1, counter>>>(a);                                     // @increment None modified
  dim3 lam(16);
  auto f = [&]() { lam.x = 32; };
  f();
  k<<<1, lam>>>(a);                                         // @lambda None does not run before every launch
  dim3 sw(16);
  switch (c) { case 1: k<<<1, sw>>>(a); break; }            // @switch None switch
  k<<<1, dim3(c)>>>(a);                                     // @runtime-int None parameter
}
void jumps(float* a, int c) {
  dim3 g(16);
  if (c) goto done;
  k<<<1, g>>>(a);                                           // @goto None goto
done:
  return;
}
"""


def _expected(text: str) -> dict[int, tuple[str, str]]:
    """Line -> (label, rest of its ``// @label ...`` comment)."""
    out = {}
    for i, line in enumerate(text.splitlines(), 1):
        marker = re.search(r"// @(\S+) (.*)$", line)
        if marker:
            out[i] = (marker.group(1), marker.group(2).strip())
    return out


def test_each_form_of_launch_configuration_resolves_or_says_why_not(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "forms.cu"
    src.write_text(FORMS)
    module = parse_file(str(src), defines={"FROM_D": "4"})
    sites = {site.loc.line: site for site in module.host.launches}
    expected = _expected(FORMS)
    assert set(sites) == set(expected)
    for line, (label, want) in expected.items():
        site = sites[line]
        if want.startswith("("):
            shape = tuple(int(v) for v in want.strip("()").split(","))
            assert site.block_shape == shape, (label, site.block_shape, site.block_from)
            assert site.block_from, label
        else:
            assert site.block_shape is None, (label, site.block_shape, site.block_from)
            reason = want.split(" ", 1)[1]
            assert reason in site.block_from, (label, site.block_from)
    # Where a shape comes from is quoted from the source.
    assert sites[_line_of("@macros")].block_from == "dim3 threads(BLOCK_SIZE, BLOCK_SIZE)"
    assert sites[_line_of("@members")].block_from == "dim3 m; m.x = BLOCK_SIZE * 2; m.y = 2"
    assert "bs = 96" in sites[_line_of("@ints")].block_from
    # Grids resolve the same way (here: every launch's grid is the literal 1).
    assert all(site.grid_shape == (1, 1, 1) for site in module.host.launches)


def _line_of(label: str) -> int:
    return next(i for i, line in enumerate(FORMS.splitlines(), 1) if f"// {label} " in line)


def _report(capsys, *extra: str, out: pathlib.Path) -> dict[int, str]:
    assert main(["translate", str(SAMPLE.source), "-o", str(out), "--report", *extra]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if ": launch of " in line]
    by_line = {}
    for line in lines:
        where = re.match(r".*launch_config\.cu:(\d+):\d+: launch of (.*)$", line)
        assert where is not None, line
        by_line[int(where.group(1))] = where.group(2)
    return by_line


def _source_line(fragment: str) -> int:
    lines = SAMPLE.source.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if fragment in line)


def test_report_names_the_version_of_each_launch_and_the_code_dispatches_to_it(capsys, tmp_path) -> None:
    out = tmp_path / "launch_config.cpp"
    report = _report(capsys, out=out)
    assert len(report) == 10
    literal = report[_source_line("axpy<<<(N + 255) / 256, 256>>>")]
    assert literal.startswith("axpy: block (256,1,1) from 256 -> specialized, coarsened x")
    macros = report[_source_line("scale2d<<<grid, threads>>>")]
    assert macros.startswith("scale2d: block (16,16,1) from dim3 threads(BLOCK_SIZE, BLOCK_SIZE) -> specialized")
    members = report[_source_line("scale2d<<<g3, t3>>>")]
    assert members.startswith("scale2d: block (8,4,1) from dim3 t3; t3.x = 8; t3.y = 4 -> specialized")
    assert "int bs; bs = 32; dim3 b1(bs) -> specialized" in report[_source_line("axpy<<<(N + bs - 1) / bs, b1>>>")]
    changed = report[_source_line("block_sums<<<(N + v.x - 1) / v.x, v>>>")]
    assert changed.startswith("block_sums: block not known at compile time (`v.x = 128`")
    assert changed.endswith("-> generic version")
    doubled = report[_source_line("block_sums<<<(N + lb.x - 1) / lb.x, lb>>>")]
    assert "lb.x *= 2" in doubled and doubled.endswith("-> generic version")
    # The launcher of axpy tests the launch's block against each specialized shape and, where the
    # grid has enough coarse blocks, runs the coarse version; block_sums has only its generic one.
    code = out.read_text()
    factor = re.search(r"coarsened x(\d+)", literal).group(1)
    assert f"axpy_launch_b256x1x1_c{factor}x1x1(" in code
    assert "block.x == 256u && block.y == 1u && block.z == 1u" in code
    assert "block_sums_launch_b" not in code


def test_minus_d_shapes_are_specialized_and_the_program_prints_the_numpy_answer(capsys, tmp_path) -> None:
    need_compiler(cpp=True)
    out = tmp_path / "launch_config.cpp"
    report = _report(capsys, "-DROW_BLOCK=64", out=out)
    macro = report[_source_line("axpy<<<(N + ROW_BLOCK - 1) / ROW_BLOCK, ROW_BLOCK>>>")]
    assert macro.startswith("axpy: block (64,1,1) from ROW_BLOCK -> specialized")
    exe = tmp_path / "launch_config"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    # One OpenMP worker: every launch of a coarsened shape has enough coarse blocks (8 per worker)
    # to run its coarse version, whatever the machine's core count.
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert ran.returncode == 0, ran.stderr
    # ROW_BLOCK changes only how axpy is cut into blocks; the dim3 changed at run time (if, loop)
    # ran the generic version with its real shape: 516 blocks of 128, then 32, 64, 128.
    assert ran.stdout == SAMPLE.expected_stdout()


@pytest.mark.parametrize("flag", ["--no-opt"])
def test_without_optimization_launches_are_specialized_but_not_coarsened(capsys, tmp_path, flag) -> None:
    report = _report(capsys, flag, out=tmp_path / "noopt.cpp")
    literal = report[_source_line("axpy<<<(N + 255) / 256, 256>>>")]
    assert literal == "axpy: block (256,1,1) from 256 -> specialized, not coarsened"


def test_a_dim3_in_a_host_function_template_has_each_instance_value(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "templated.cu"
    src.write_text("""template <int B>
__global__ void k(float* a, int n) { int i = blockIdx.x * B + threadIdx.x; if (i < n) a[i] = i; }
template <int B>
void run(float* a, int n) {
  dim3 b(B);
  k<B><<<(n + B - 1) / B, b>>>(a, n);
}
int main() {
  float* a;
  cudaMalloc(&a, 1000 * sizeof(float));
  run<128>(a, 1000);
  run<64>(a, 1000);
  return 0;
}
""")
    sites = parse_file(str(src)).host.launches
    assert sorted((s.kernel, s.block_shape, s.block_from) for s in sites) == [
        ("k_128", (128, 1, 1), "dim3 b(B)"), ("k_64", (64, 1, 1), "dim3 b(B)")]
    assert all(s.grid_shape is None and "n is a parameter" in s.grid_from for s in sites)
