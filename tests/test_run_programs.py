"""``polypy run``: whole programs with every launch emulated, and the translated program against them.

The emulator-run program is the oracle: host code compiled natively, each kernel launch executed
by the reference emulator on the program's own device memory.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from c_support import need_compiler
from samples.spec import ProgramSample, all_programs
from test_programs import outputs_match

PROGRAMS = all_programs()


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.cli", "run", *args], capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_emulated_program_prints_the_expected_output_and_the_translation_agrees(program: ProgramSample) -> None:
    need_compiler(cpp=True)
    emulated = _run(str(program.source), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    problem = outputs_match(emulated.stdout, program.expected_stdout(), program.float_rtol)
    assert problem is None, problem
    native = _run(str(program.source))
    assert native.returncode == 0, native.stderr
    problem = outputs_match(native.stdout, emulated.stdout, program.float_rtol)
    assert problem is None, problem


def test_emulated_program_reports_a_race_with_its_location(tmp_path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "race.cu"
    src.write_text("""#include <cstdio>
#include <cuda_runtime.h>
__global__ void shift(float* x) {
  __shared__ float s[64];
  s[threadIdx.x] = x[threadIdx.x];
  x[threadIdx.x] = s[(threadIdx.x + 1) % 64];   // reads another thread's slot: a barrier is missing
}
int main() {
  float* d;
  cudaMalloc(&d, 64 * sizeof(float));
  cudaMemset(d, 0, 64 * sizeof(float));
  shift<<<1, 64>>>(d);
  printf("done\\n");
  return 0;
}
""")
    result = _run(str(src), "--emulate")
    assert result.returncode == 1
    assert "race" in result.stderr and f"{src}:6" in result.stderr
    assert "done" not in result.stdout


def test_run_needs_a_main_or_a_sample_description(tmp_path) -> None:
    src = tmp_path / "lib.cu"
    src.write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    result = _run(str(src))
    assert result.returncode == 1 and "nothing to run" in result.stderr


def test_run_of_a_kernel_sample_checks_every_launch_shape() -> None:
    result = _run("samples/saxpy.cu", "--emulate")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": ok") == 3
