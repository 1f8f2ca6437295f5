"""Our plain OpenMP ports of PolyBench/GPU (bench/omp_polybench, issue 37) and the PolyBench runner's
--omp check: three ports built at small sizes against NumPy references, how their output and a
POLYPY_TRACE_COPIES trace are read and compared (PolyBench's percentDiff), and the runner's port
column on a tiny self-checking program of our own (the real suite is not needed)."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from bench import real_programs, real_programs_ports as ports
from bench.real_programs import Build, Check, Program, Row, Tools, format_table, measure_suite, summary

needs_cc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the OpenMP ports")
needs_cxx = pytest.mark.skipif(shutil.which("g++") is None or shutil.which("gcc") is None,
                               reason="needs gcc and g++ to build a translated program")

SIZES = {"GEMM": ("-DNI=24", "-DNJ=20", "-DNK=16"), "ATAX": ("-DNX=40", "-DNY=40"),
         "JACOBI1D": ("-DN=50", "-DTSTEPS=7")}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, tuple[list[np.ndarray], str]]:
    """Each port of SIZES built (the runner's own compile command) and run on two threads: what
    it wrote, and its stdout."""
    work = tmp_path_factory.mktemp("ports")
    out = {}
    for name, flags in SIZES.items():
        exe = work / name
        subprocess.run(ports.compile_command(name, ("-DN=1", *flags, "-DPOLYBENCH_TIME"), exe, "gcc",
                                             real_programs.CFLAGS), check=True, capture_output=True, timeout=300)
        run = subprocess.run([str(exe), str(work / f"{name}.bin")], check=True, capture_output=True, text=True,
                             timeout=60, env={"OMP_NUM_THREADS": "2", "PATH": ""})
        out[name] = (ports.read_port_output(work / f"{name}.bin"), run.stdout)
    return out


@needs_cc
def test_gemm_port_matches_numpy(outputs):
    [c], stdout = outputs["GEMM"]
    ni, nj, nk = 24, 20, 16
    i = np.arange(ni, dtype=np.float64)[:, None]
    a = (i * np.arange(nk)) / ni
    b = (np.arange(nk, dtype=np.float64)[:, None] * np.arange(nj)) / ni
    c0 = (i * np.arange(nj)) / ni
    assert c.shape == (ni, nj)
    np.testing.assert_allclose(c, 32412.0 * (a @ b) + 2123.0 * c0, rtol=2e-5)
    assert ports.port_seconds(stdout) >= 0.0


@needs_cc
def test_atax_port_matches_numpy(outputs):
    [y], _ = outputs["ATAX"]
    n = 40
    a = (np.arange(n, dtype=np.float64)[:, None] * np.arange(n)) / n
    x = np.arange(n) * 3.14159
    np.testing.assert_allclose(y, a.T @ (a @ x), rtol=2e-5)


@needs_cc
def test_jacobi1d_port_matches_numpy_step_by_step(outputs):
    """The program's arithmetic exactly: the three floats summed in float, times the double
    0.33333, stored as float; A takes B's interior after each step."""
    (a_out, b_out), _ = outputs["JACOBI1D"]
    n = 50
    a = ((4.0 * np.arange(n, dtype=np.float32) + 10) / n).astype(np.float32)
    b = ((7.0 * np.arange(n, dtype=np.float32) + 11) / n).astype(np.float32)
    for _ in range(7):
        b[1:-1] = (0.33333 * (a[:-2] + a[1:-1] + a[2:]).astype(np.float64)).astype(np.float32)
        a[1:-1] = b[1:-1]
    np.testing.assert_array_equal(a_out, a)
    np.testing.assert_array_equal(b_out, b)


def test_every_polybench_program_of_the_new_tree_has_a_port():
    from bench.real_programs_polybench import _PROGRAMS
    assert sorted(ports.PORTS) == sorted(name for name, _, _ in _PROGRAMS)
    assert all((ports.PORTS_DIR / f"{name}.c").exists() for name in ports.PORTS)


def test_port_flags_keep_the_size_switches_only():
    flags = ("-DN=1", "-DNI=64", "-DPOLYBENCH_TIME", "-I/x", "-DDATA_TYPE=double")
    assert ports.port_flags("GEMM", flags) == ["-DN=1", "-DNI=64"]
    assert ports.port_flags("JACOBI2D", ("-DN=256", "-DTSTEPS=10")) == []  # its .cu fixes them


def test_trace_of_floats_and_of_bytes_reads_back_the_same_values(tmp_path):
    values = np.array([1.5, -2.25, 3.0e-7], dtype=np.float32)
    as_bytes = "\n".join(str(int(v)) for v in values.view(np.uint8))
    trace = tmp_path / "copies.txt"
    trace.write_text("device-to-host copy of 3 float\n1.5\n-2.25\n3.00000003e-07\n"
                     f"device-to-host copy of 12 bytes\n{as_bytes}\n")
    first, second = ports.read_trace(trace)
    np.testing.assert_array_equal(first.astype(np.float32), values)
    np.testing.assert_array_equal(second.astype(np.float32), values)
    trace.write_text("device-to-host copy of 3 float\n1.5\n")
    with pytest.raises(ValueError, match="has 1 values"):
        ports.read_trace(trace)


def test_compare_uses_percent_diff_and_the_programs_region():
    ref = np.ones((4, 4), dtype=np.float32)
    got = ref.astype(np.float64).ravel().copy()
    got[0] = 99.0  # on the border: 2DCONV does not compare it
    assert ports.compare_outputs("2DCONV", [ref], [got]) is None
    assert "1 of 16 values differ" in ports.compare_outputs("GEMM", [ref], [got])
    got[0] = 1.0004  # 0.04 percent: within GEMM's 0.05
    assert ports.compare_outputs("GEMM", [ref], [got]) is None
    got[0] = 1.0006
    assert "first at [0, 0]: port 1, polypy 1.0006" in ports.compare_outputs("GEMM", [ref], [got])
    small = np.full((4, 4), 0.001, dtype=np.float32)
    assert ports.compare_outputs("GEMM", [small], [np.full(16, 0.009)]) is None  # both below 0.01
    assert "differ" in ports.compare_outputs("GEMM", [small], [np.full(16, np.nan)])
    assert ports.compare_outputs("GEMM", [small + np.nan], [np.full(16, np.nan)]) is None  # NaN where the port has NaN
    assert "wrote 1 arrays, the program copied 2" in ports.compare_outputs("GEMM", [ref], [got, got])


def test_table_and_summary_show_the_port_column():
    rows = [Row("GEMM", "GEMM", "ok", "ok", "ok", "yes", "self-check", t_polypy=0.5, t_serial=2.0, port="yes",
                t_port=1.0),
            Row("SYRK", "SYRK", "ok", "ok", "ok", "yes", "self-check", t_polypy=2.0, t_serial=1.0, port="yes",
                t_port=1.0),
            Row("LU", "LU", "ok", "ok", "ok", "yes", "self-check", t_polypy=1.0, t_serial=1.0, port="NO")]
    s = summary(rows)
    assert (s["ports_checked"], s["ports_matching"], s["timed_against_port"]) == (3, 2, 2)
    assert s["geomean_port_over_polypy"] == pytest.approx(1.0)
    assert s["slower_than_port"] == ["SYRK"]
    table = format_table(rows, timed=True)
    assert "| GEMM | ok | ok | ok | yes | self-check | 0.500000 | 2.000000 | 4.00 | yes | 1.000000 | 2.00 |" in table
    assert "OpenMP ports (bench/omp_polybench): 2 of 3 match" in table
    assert "geomean t_omp_port / t_polypy over 2 programs: 1.00; below 1: SYRK" in table


# A PolyBench-like program of our own: doubles an N x N array on the "GPU", copies it back into a
# pointer to rows (traced as bytes, as PolyBench's arrays are), checks itself and prints its time.
TWICE_CU = r"""
#include <cstdio>
#include <cstdlib>
#define N 8
__global__ void twice(float *a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N * N) a[i] = 2.0f * a[i] + 1.0f;
}
int main() {
    float (*h)[N] = (float (*)[N])malloc(N * N * sizeof(float)), *d;
    for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) h[i][j] = i * j;
    cudaMalloc(&d, N * N * sizeof(float));
    cudaMemcpy(d, h, N * N * sizeof(float), cudaMemcpyHostToDevice);
    twice<<<2, 32>>>(d);
    cudaMemcpy(h, d, N * N * sizeof(float), cudaMemcpyDeviceToHost);
    printf("GPU Time in seconds:\n0.250000\nCPU Time in seconds:\n1.000000\n");
    printf("Non-Matching CPU-GPU Outputs Beyond Error Threshold of 0.05 Percent: %d\n", h[7][7] != 99.0f);
    return 0;
}
"""

# its "port" (printing a made-up time); OFF makes one value wrong by 1 percent
TWICE_PORT = r"""
#include "port.h"
int main(int argc, char **argv) {
    DATA_TYPE *a = port_alloc(64);
    for (int i = 0; i < 64; i++) a[i] = 2.0f * (float)((i / 8) * (i % 8)) + 1.0f;
    a[9] *= 1.0f + OFF;
    printf("OpenMP port time in seconds: 0.500000\n");
    FILE *f = port_output(argc, argv);
    port_write(f, a, 2, 8, 8, 0);
    if (f) fclose(f);
    return 0;
}
"""


@needs_cxx
def test_runner_checks_and_times_a_port_against_the_traced_program(tmp_path, monkeypatch):
    from bench.real_programs_polybench import SELF_CHECK, SELF_TIMES
    port_dir = tmp_path / "ports"
    port_dir.mkdir()
    shutil.copy(ports.PORTS_DIR / "port.h", port_dir / "port.h")
    (port_dir / "GOOD.c").write_text(TWICE_PORT.replace("OFF", "0.0f"))
    (port_dir / "BAD.c").write_text(TWICE_PORT.replace("OFF", "0.01f"))
    monkeypatch.setattr(ports, "PORTS_DIR", port_dir)
    monkeypatch.setattr(ports, "PORTS", {"GOOD": ports.PortSpec(0.05), "BAD": ports.PortSpec(0.05)})
    root = tmp_path / "suite"
    (root / "twice").mkdir(parents=True)
    (root / "twice" / "twice.cu").write_text(TWICE_CU)
    programs = [Program(name, Build("twice", cu=("twice.cu",)), check=Check("self", pattern=SELF_CHECK),
                        self_times=SELF_TIMES, omp_port=name) for name in ("GOOD", "BAD")]
    good, bad = measure_suite(programs, root, Tools(threads=1), timed=True, repeat=2, omp_ports=True)
    assert (good.correct, good.port, good.blocker) == ("yes", "yes", "")
    assert (good.t_polypy, good.t_serial, good.t_port, good.port_ratio) == (0.25, 1.0, 0.5, 2.0)
    assert (bad.correct, bad.port, bad.t_port) == ("yes", "NO", None)
    assert bad.blocker == ("omp port: array #1: 1 of 64 values differ by more than 0.05 percent, "
                           "first at [1, 1]: port 3.03, polypy 3")
