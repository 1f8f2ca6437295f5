"""``polypy run``: whole programs with every launch emulated, and the translated program against them.

The emulator-run program is the oracle: host code compiled natively, each kernel launch executed
by the reference emulator on the program's own device memory.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys

import pytest

from c_support import need_compiler, run_against_runtime
from samples.spec import ProgramSample, all_programs
from test_programs import outputs_match

PROGRAMS = all_programs()


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", *args], capture_output=True, text=True,
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


EMPTY_GRID_NO_RETURN = """#include <cstdio>
#include <cuda_runtime.h>
__global__ void fill(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 1.0f;
}
int main() {
  float* d;
  cudaMalloc(&d, 4 * sizeof(float));
  cudaMemset(d, 0, 4 * sizeof(float));
  int n = 0;
  fill<<<(n + 255) / 256, 256>>>(d, n);   // no blocks: nothing happens
  fill<<<dim3(4, 0), 256>>>(d, 4);        // no blocks either
  float h[4];
  cudaMemcpy(h, d, 4 * sizeof(float), cudaMemcpyDeviceToHost);
  printf("%g %g\\n", h[0], h[3]);
  fill<<<1, 256>>>(d, 4);
  cudaMemcpy(h, d, 4 * sizeof(float), cudaMemcpyDeviceToHost);
  printf("%g %g\\n", h[0], h[3]);
}
"""


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["native", "emulated"])
def test_empty_grids_do_nothing_and_main_without_return_returns_0(tmp_path, mode) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "empty.cu"
    src.write_text(EMPTY_GRID_NO_RETURN)
    result = _run(str(src), *mode)
    assert (result.returncode, result.stdout, result.stderr) == (0, "0 0\n1 1\n", "")


def test_a_program_the_cxx_compiler_rejects_is_a_clean_error(tmp_path) -> None:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("needs g++ (the program is valid for clang, which the frontend uses, and not for g++)")
    src = tmp_path / "rejected.cu"
    src.write_text("""#include <cstdio>
__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }
#ifndef __clang__
static int broken = not_declared_anywhere;
#endif
int main() { printf("never\\n"); return 0; }
""")
    env = dict(os.environ, CXX=gxx)
    for mode in ((), ("--emulate",)):
        result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(src), *mode], capture_output=True,
                                text=True, timeout=600, env=env)
        assert result.returncode == 1 and result.stdout == ""
        lines = result.stderr.splitlines()
        assert lines[0] == f"polypy: error: the C++ compiler rejected the generated code for {src}:"
        assert "not_declared_anywhere" in lines[1] and "error" in lines[1]
        assert "Traceback" not in result.stderr


LARGE_COPIES = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
// Copies and fills of 8 MiB and more run in 2 MiB pieces on all cores: sizes that are not a
// multiple of a piece, an unaligned start inside a block, a fill, and a device-to-device copy.
__global__ void touch(unsigned char* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = (unsigned char)(d[i] + 1);
}
int main() {
  const size_t n = ((size_t)9 << 20) + 12345;
  unsigned char* h = (unsigned char*)malloc(n);
  unsigned char* back = (unsigned char*)malloc(n);
  for (size_t i = 0; i < n; ++i) h[i] = (unsigned char)(i * 7 + i / 4099);
  unsigned char *a, *b;
  cudaMalloc(&a, n);
  cudaMalloc(&b, n + 100);
  cudaMemset(b, 3, n + 100);
  cudaMemcpy(a, h, n, cudaMemcpyHostToDevice);
  touch<<<(64 + 255) / 256, 256>>>(a, 64);
  cudaMemcpy(b + 17, a, n, cudaMemcpyDeviceToDevice);
  cudaMemcpy(back, b, n + 17, cudaMemcpyDeviceToHost);
  size_t bad = 0;
  for (size_t i = 0; i < 17; ++i) bad += back[i] != 3;
  for (size_t i = 0; i < n; ++i) bad += back[i + 17] != (unsigned char)(h[i] + (i < 64));
  cudaMemset(a, 0, n);
  cudaMemcpy(back, a, n, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < n; ++i) bad += back[i] != 0;
  printf("%zu wrong bytes\n", bad);
  return 0;
}
"""


@pytest.mark.parametrize("threads", ["1", "2"])
def test_large_copies_and_fills_in_pieces_on_every_core(tmp_path, threads) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "copies.cu"
    src.write_text(LARGE_COPIES)
    env = dict(os.environ, OMP_NUM_THREADS=threads)
    result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(src)], capture_output=True,
                            text=True, timeout=600, env=env)
    assert (result.returncode, result.stdout, result.stderr) == (0, "0 wrong bytes\n", "")


POPULATE = r"""
#include <cstdio>
#include <sys/mman.h>
#include <unistd.h>
#include "cuda_runtime.h"
// polypy_rt_populate(d, len): where [d, d + len) starts on a page never touched, the whole pages
// inside it are faulted in (resident before anything is written); partial pages at the ends,
// short ranges and ranges whose first page is already there are left alone.
static int resident(const char* p) {
  unsigned char v = 0;
  if (mincore((void*)p, 4096, &v) != 0) return -1;
  return v & 1;
}
int main() {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = 256;
  char* m = (char*)mmap(0, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 2;
  polypy_rt_populate(m + 100, 100 * page);  // whole pages 1..99 inside; page 0 and 100 partial
  printf("ends %d %d\n", resident(m), resident(m + 100 * page));
  int inside = 0;
  for (size_t i = 1; i < 100; ++i) inside += resident(m + i * page);
  printf("inside %d\n", inside);
  polypy_rt_populate(m + 120 * page, POLYPY_RT_POPULATE_BYTES / 2);  // too short to be worth it
  printf("short %d\n", resident(m + 121 * page));
  m[140 * page] = 1;  // first page there already: one mincore call, nothing populated
  polypy_rt_populate(m + 140 * page, 100 * page);
  printf("touched %d %d\n", resident(m + 140 * page), resident(m + 141 * page));
  long sum = 0;
  for (size_t i = 0; i < pages * page; ++i) sum += m[i];
  printf("sum %ld\n", sum);
  return 0;
}
"""


def test_copies_into_fresh_pages_fault_them_in_at_once(tmp_path) -> None:
    release = tuple(int(x) for x in platform.release().split("-")[0].split(".")[:2])
    if platform.system() != "Linux" or release < (5, 14):
        pytest.skip("MADV_POPULATE_WRITE needs Linux 5.14")
    assert run_against_runtime(tmp_path, "populate", POPULATE) == "ends 0 0\ninside 99\nshort 0\ntouched 1 0\nsum 1\n"
