"""Host loops of launches run in one OpenMP parallel region (``frontend.merge_loops``,
``codegen.c.merged_loops``) exactly where the host code between the launches is scalar work on
locals, with the results CUDA's sequential host gives; any other host code keeps the launches
separate, and ``--report`` says which construct prevented the merge.

``programs/merged_loops.cu`` has one host function per case; ``_reference`` computes what each
returns, the way the CUDA program defines it, in Python.
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from c_support import need_compiler
from codegen.c import find_compiler

PROGRAM = pathlib.Path(__file__).parent / "programs" / "merged_loops.cu"
N = 1000


def _cmod(a: int, m: int) -> int:  # C's % (truncating)
    return a % m if a >= 0 else -((-a) % m)


def _ints(seed: int) -> list[int]:
    return [(i * seed) % 1009 for i in range(N)]


def _step(a: list[int], t: int) -> list[int]:
    return [_cmod(a[i] * 3 + a[(i + 1) % N] + t, 1009) for i in range(N)]


def _checksum(h: list[int]) -> int:
    s = 0
    for v in h:
        s = _cmod(s * 31, 1000000007) + v
    return s


def _scalar_loop() -> int:
    f = np.float32
    x = np.array([i % 13 for i in range(N)], dtype=np.float32)
    alpha, k, gx = f(1.0), 0, 8
    while k < 100:
        alpha = f(f(alpha * f(0.75)) + f(k % 3))
        m = min(N, gx * 128)
        x[:m] = x[:m] * f(0.5) + alpha
        gx = 8 if alpha > f(3.0) else 4
        k += 1
        if k == 40:
            break
    s = 0.0
    for i in range(N):
        s += float(f(x[i] * f(i + 1)))
    return int(s * 1000) + k * 100000000 + int(f(alpha * f(1000)))


def _reference() -> list[int]:
    a = _ints(7)
    for t in range(50):
        a = _step(a, t)
    swap = _checksum(a) + 100
    x, total = _ints(3), 0
    for r in range(30):
        total += sum(x)
        x = _step(x, r)
    a, copied = _ints(5), 0
    for t in range(5):
        a = _step(a, t)
        copied += a[t]
    nested = _ints(11)
    for r in range(3):
        for t in range(4):
            nested = _step(_step(nested, t + r), t - r)
    a, b, threads = _ints(2), _ints(0), 128
    for t in range(6):
        if threads <= 1024:  # the launch of t = 3 has 2048 threads a block: it runs nothing
            b = _step(a, t)
        threads = 2048 if t == 2 else 128
        a, b = b, a
    bad = _checksum(a) * 100 + 9  # cudaErrorInvalidConfiguration, once
    streamed = _ints(5)
    for t in range(4):
        streamed = _step(_step(streamed, t), t)
    return [swap, _scalar_loop(), total, copied, _checksum(nested), bad, _checksum(streamed),
            _checksum(_step(_ints(5), 3))]


# (line of the loop, merged, what the report says)
DECISIONS = [
    (44, True, "each thread keeps its own a, b, steps, copied back after the loop"),
    (62, True, "each thread keeps its own alpha, grid, k, copied back after the loop"),
    (81, True, "the host code between its launches is scalar work on locals"),
    (96, False, "a call of cudaMemcpy (line 98)"),
    (108, False, "a call of printf (line 113)"),
    (109, True, "the host code between its launches is scalar work on locals"),
    (123, True, "each thread keeps its own a, b, threads, copied back after the loop"),
    (136, False, "a launch on a stream (line 137)"),
    (149, False, "a memory access (h [ 0 ]) (line 151)"),
]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600)


def test_report_says_which_host_loops_are_merged_and_why_not(tmp_path) -> None:
    lines = PROGRAM.read_text().splitlines()
    translated = _cli("translate", str(PROGRAM), "--report", "-o", str(tmp_path / "out.cpp"))
    assert translated.returncode == 0, translated.stderr
    found = [(int(m.group(1)), m.group(2) == "merged into one parallel region", m.group(3)) for m in re.finditer(
        r"merged_loops\.cu:(\d+):\d+: host loop with \d+ launch(?:es)?: "
        r"(merged into one parallel region|launches kept separate): (.*)", translated.stderr)]
    assert [(line, merged) for line, merged, _ in found] == [(line, merged) for line, merged, _ in DECISIONS], found
    for (line, _, why), (_, _, phrase) in zip(found, DECISIONS):
        assert phrase in why, (line, why)
        assert lines[line - 1].lstrip().startswith(("for", "while")), line


# Small grids of kernels without loops run on the leader alone (POLYPY_RT_SMALL_GRID_WORK):
# with the limit at 1 every launch is shared by the team.
@pytest.mark.parametrize("threads, small", [("1", ()), ("4", ()), ("4", ("-DPOLYPY_RT_SMALL_GRID_WORK=1",))])
def test_merged_loops_give_the_results_of_cuda_s_sequential_host(tmp_path, threads, small) -> None:
    need_compiler(cpp=True)
    out = tmp_path / "merged_loops.cpp"
    translated = _cli("translate", str(PROGRAM), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    code = out.read_text()
    # One parallel region per merged loop, around the loop as written; the variables it assigns
    # that were declared before it are private and copied back.
    body = code[code.index("long long swap_loop()"):code.index("long long scalar_loop()")]
    assert body.count("#pragma omp parallel") == 1
    assert "#pragma omp parallel firstprivate(a, b, steps)" in body
    assert "if (polypy_rt_team_leader()) { *polypy_keep_a = a; *polypy_keep_b = b; *polypy_keep_steps = steps; }" \
        in body
    kept = code[code.index("long long copy_in_loop()"):code.index("long long nested_loops()")]
    assert "#pragma omp parallel" not in kept
    assert code.count("polypy_rt_team_scope polypy_team;") == 5
    exe = tmp_path / "merged_loops"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", *small, str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OMP_NUM_THREADS": threads})
    assert run.returncode == 0, run.stderr
    numbers = [int(line) for line in run.stdout.splitlines() if not line.startswith("round")]
    assert numbers == _reference()
    assert [line for line in run.stdout.splitlines() if line.startswith("round")] == ["round 0", "round 1", "round 2"]


def _decisions(tmp_path, body: str) -> list[tuple[bool, str]]:
    from frontend.parse import parse_file

    src = tmp_path / "loop.cu"
    src.write_text("#include <cuda_runtime.h>\n#include <cstdio>\n"
                   "__global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }\n"
                   "int g;\n__device__ int dev;\n"
                   "void f(float* x, float* y, int n, int& r) {\n" + body + "\n}\n")
    host = parse_file(str(src)).host
    assert host is not None
    return [(l.merged, l.why) for l in host.loops]


@pytest.mark.parametrize("body, merged, why", [
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); float* s = x; x = y; y = s; }", True,
     "each thread keeps its own x, y"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); cudaDeviceSynchronize(); }", True, "scalar work"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); x[0] = 1.0f; }", False, "an assignment to x [ 0 ], not a local"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); *y = 2.0f; }", False, "an assignment to * y"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); float v = *y; }", False, "a read through a pointer"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); g++; }", False, "an assignment to g, not a local"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); r++; }", False, "of type int &"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); if (dev) break; }", False,
     "a host read of the device variable dev"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); if (t == 3) return; }", False, "a return in the loop"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); static int c = 0; }", False, "the static variable c"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); cudaEvent_t e; cudaEventCreate(&e); }", False,
     "a call of cudaEventCreate"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); cudaMemset(x, 0, 4); }", False, "a call of cudaMemset"),
    ("for (int t = 0; t < n; t++) k<<<1, 32>>>(x, n);", False, "its body is not a { ... } block"),
    ("int t = 0; do { k<<<1, 32>>>(x, n); } while (++t < n);", False, "a do-while loop"),
    ("#pragma omp parallel for\nfor (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); }", False,
     "a pragma on the loop or in it"),
    ("for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n);\n#pragma omp critical\nn += 1; }",
     False, "a pragma on the loop or in it"),
])
def test_what_keeps_a_loop_s_launches_separate(tmp_path, body, merged, why) -> None:
    (decision,) = _decisions(tmp_path, body)
    assert decision[0] == merged, decision
    assert why in decision[1], decision


def test_threads_option_sets_the_merged_region_s_team_too(tmp_path) -> None:
    out = tmp_path / "threads.cpp"
    translated = _cli("translate", str(PROGRAM), "--threads", "3", "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    code = out.read_text()
    assert "#pragma omp parallel num_threads(3) firstprivate(a, b, steps)\n" in code
    assert "#pragma omp parallel firstprivate" not in code
    # Every kernel here is launched in a merged loop: each launcher shares grids with a team.
    assert code.count("if (polypy_rt_in_team())") == code.count("auto polypy_blocks = [&]") > 0


def test_only_launchers_a_merged_loop_calls_share_grids_with_a_team(tmp_path) -> None:
    from codegen.c.module import in_merged_loops
    from frontend.parse import parse_file

    src = tmp_path / "team.cu"
    src.write_text("#include <cuda_runtime.h>\n"
                   "__global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }\n"
                   "__global__ void j(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }\n"
                   "void f(float* x, int n) {\n  j<<<1, 32>>>(x, n);\n"
                   "  for (int t = 0; t < n; t++) { k<<<1, 32>>>(x, n); }\n"
                   "  for (int t = 0; t < n; t++) { j<<<1, 32>>>(x, n); cudaMemset(x, 0, 4); }\n}\n")
    module = parse_file(str(src))
    assert module.host is not None
    assert [l.merged for l in module.host.loops] == [True, False]
    assert in_merged_loops(module.host, {k.name: k for k in module.kernels}) == {"k"}
