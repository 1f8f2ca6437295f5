"""bench/real_programs.py's machinery on a tiny suite of our own, written into tmp_path: one
program that translates, builds, runs and matches its reference build, one that polypy refuses,
one whose reference disagrees, one that checks itself. The real suites (Rodinia,
PolyBench/GPU) are not needed."""
from __future__ import annotations

import json
import pathlib
import shutil
import sys

import pytest

from bench import real_programs
from bench.real_programs import (Build, Check, Output, Program, Row, Tools, compare, first_error, format_table,
                                 main, measure_suite, numbers, summary)

needs_cxx = pytest.mark.skipif(shutil.which("g++") is None or shutil.which("gcc") is None,
                               reason="needs gcc and g++ to build the translated programs")

# squares n numbers read from a file on the "GPU" and writes them to out.txt
GOOD_CU = r"""
#include <cstdio>
#include <cstdlib>
__global__ void square(int n, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    FILE *f = fopen(argv[2], "r");
    float *x = (float *)malloc(n * sizeof(float)), *y = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) fscanf(f, "%f", &x[i]);
    fclose(f);
    float *dx, *dy;
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc(&dy, n * sizeof(float));
    cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    square<<<(n + 63) / 64, 64>>>(n, dx, dy);
    cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    printf("Kernel time: 0.123 ms\n");
    FILE *o = fopen("out.txt", "w");
    for (int i = 0; i < n; i++) fprintf(o, "%d %g\n", i, y[i]);
    fclose(o);
    printf("RESULT %s\n", y[n - 1] == x[n - 1] * x[n - 1] ? "PASS" : "FAIL");
    return 0;
}
"""

# the hand-written "OpenMP version" of the same program (the reference build)
REF_C = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    FILE *f = fopen(argv[2], "r");
    FILE *o = fopen("out.txt", "w");
    for (int i = 0; i < n; i++) { float v; fscanf(f, "%f", &v); fprintf(o, "%d %g\n", i, v * v OFFSET); }
    fclose(f); fclose(o);
    printf("done in 0.5 seconds\n");
    return 0;
}
"""

# a kernel polypy must refuse (a barrier in a recursive device function), with a located error
BAD_CU = r"""
__device__ int fact(int n) { __syncthreads(); return n <= 1 ? 1 : n * fact(n - 1); }
__global__ void k(int *y) { y[threadIdx.x] = fact(threadIdx.x); }
int main() {
    int *d;
    cudaMalloc(&d, 32 * sizeof(int));
    k<<<1, 32>>>(d);
    return 0;
}
"""


def _inputs(directory: pathlib.Path, size: str) -> dict[str, str]:
    n = {"tiny": 10, "small": 100, "time": 1000}[size]
    path = directory / "x.txt"
    path.write_text("".join(f"{0.5 * i - 7}\n" for i in range(n)))
    return {"n": str(n), "x": str(path)}


def _suite(root: pathlib.Path) -> list[Program]:
    for name, files in {"good": {"square.cu": GOOD_CU}, "bad": {"fact.cu": BAD_CU},
                        "ref_ok": {"ref.c": REF_C.replace("OFFSET", "")},
                        "ref_off": {"ref.c": REF_C.replace("OFFSET", "+ (i == 42 ? 1.0f : 0.0f)")}}.items():
        (root / name).mkdir(parents=True)
        for file, text in files.items():
            (root / name / file).write_text(text)
    args = ("{n}", "{x}")
    good = Build("good", cu=("square.cu",))
    return [
        Program("square", good, args, _inputs, Check("omp", Output("out.txt")), omp=Build("ref_ok", c=("ref.c",))),
        Program("fact", Build("bad", cu=("fact.cu",)), (), None, Check("self", pattern="(?P<ok>x)", expect="x")),
        Program("square_wrong_ref", good, args, _inputs, Check("omp", Output("out.txt")),
                omp=Build("ref_off", c=("ref.c",))),
        Program("square_self", good, args, _inputs, Check("self", pattern=r"RESULT (?P<ok>\w+)", expect="PASS")),
        Program("square_no_input", good, ("{n}", "{video}"), _inputs, Check("none"), note="needs a video"),
    ]


def test_numbers_select_lines_and_drop_timings():
    text = "header 1 2\nKernel time: 3.5 ms\nstart here\n1 2.5e-3\nExec: 0.4\n-7 nan\n"
    assert numbers(text, Output()) == pytest.approx([1, 2, 1, 2.5e-3, -7, float("nan")], nan_ok=True)
    assert numbers(text, Output(start="start here")) == pytest.approx([1, 2.5e-3, -7, float("nan")], nan_ok=True)
    assert numbers(text, Output(last=1)) == pytest.approx([-7, float("nan")], nan_ok=True)


def test_compare_reports_the_first_difference():
    assert compare([1.0, 2.0], [1.0, 2.0000001], rtol=1e-6, atol=0) is None
    assert compare([1.0, 2.0, 3.0], [1.0, 2.5, 3.5], rtol=1e-3, atol=0) == "2 of 3 numbers differ, first #1: 2 vs 2.5"
    assert compare([1.0], [1.0, 2.0], rtol=0, atol=0) == "1 numbers vs 2 in the reference"
    assert compare([1.0], [], rtol=0, atol=0) == "the reference printed no numbers"


def test_first_error_shortens_paths_and_picks_the_error_line():
    text = "In file included from x\n/tmp/a/b/prog.cu:3:4: error: no member named 'foo'\nnote: y\n"
    assert first_error(text) == "prog.cu:3:4: error: no member named 'foo'"
    assert first_error("x" * 300, limit=20) == "x" * 17 + "..."


def test_summary_counts_a_benchmark_when_all_its_programs_pass():
    rows = [Row("a1", "a", "ok", "ok", "ok", "yes", t_polypy=1.0, t_omp=2.0),
            Row("a2", "a", "ok", "ok", "FAIL", "-"),
            Row("b", "b", "ok", "ok", "ok", "yes", t_polypy=2.0, t_omp=1.0),
            Row("c", "c", "ok", "ok", "ok", "NO", t_polypy=1.0, t_omp=8.0)]
    s = summary(rows)
    assert (s["benchmarks"], s["translate"], s["run"], s["correct"]) == (3, 3, 2, 1)
    # geomean over the programs correct in both: a1 (2.0) and b (0.5); c is wrong
    assert s["geomean_omp_over_polypy"] == pytest.approx(1.0)
    assert s["timed"] == 2


@needs_cxx
def test_fake_suite_end_to_end(tmp_path):
    root = tmp_path / "suite"
    rows = {r.name: r for r in measure_suite(_suite(root), root, Tools(threads=2), timed=True)}
    good = rows["square"]
    assert (good.translate, good.compile, good.run, good.correct, good.blocker) == ("ok", "ok", "ok", "yes", "")
    assert good.t_polypy is not None and good.t_omp is not None and good.ratio is not None
    bad = rows["fact"]
    assert (bad.translate, bad.compile, bad.correct) == ("FAIL", "-", "-")
    assert bad.blocker.startswith("translate: fact.cu:2:")
    assert "recurs" in bad.blocker
    wrong = rows["square_wrong_ref"]
    assert wrong.correct == "NO"
    assert wrong.blocker == "correct: 1 of 200 numbers differ, first #85: 196 vs 197"
    assert wrong.t_polypy is None  # a wrong program is not timed
    assert rows["square_self"].correct == "yes"
    assert rows["square_no_input"].run == "n/a" and rows["square_no_input"].blocker == "input: needs a video"
    table = format_table(list(rows.values()), timed=True)
    assert "| fact | FAIL | - | - | - | self-check | - | - | - | translate: fact.cu:2:" in table
    assert "5 benchmarks (5 programs): translate 4, compile 4, run 3, correct 2" in table
    # square_self has no reference build to time against
    assert "geomean t_omp / t_polypy over 1 programs correct in both" in table


@needs_cxx
def test_command_line_writes_json(tmp_path, monkeypatch, capsys):
    root = tmp_path / "suite"
    programs = _suite(root)[:2]
    monkeypatch.setattr("bench.real_programs.load_suite", lambda name, path: programs)
    out = tmp_path / "rows.json"
    assert main(["rodinia", str(root), "--only", "fact", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["suite"] == "rodinia" and [r["name"] for r in doc["rows"]] == ["fact"]
    assert doc["summary"]["translate"] == 0
    assert "| fact | FAIL |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="unknown program"):
        main(["rodinia", str(root), "--only", "nope"])


def test_tools_default_to_this_python():
    assert Tools().polypy[0] == sys.executable


@needs_cxx
def test_fixed_time_pins_the_clock_of_a_run(tmp_path):
    """Program.fixed_time: the runner's preloaded shim makes time() return that constant (both
    versions of lavaMD seed rand() from time(NULL)); without it the real clock is seen."""
    import subprocess

    from bench.real_programs import fixed_time_environment, run_binary

    source = tmp_path / "clock.c"
    source.write_text('#include <stdio.h>\n#include <time.h>\n'
                      'int main(void) { time_t t = 0; time_t r = time(&t); printf("%ld %ld\\n", (long)r, (long)t); }\n')
    binary = tmp_path / "clock"
    subprocess.run(["gcc", str(source), "-o", str(binary)], check=True)
    tools = Tools(threads=1)
    pinned = Program("clock", Build("x"), fixed_time=123456789)
    env = fixed_time_environment(pinned, tmp_path, tools)
    r, _ = run_binary(binary, (), tmp_path / "run", timeout=30, threads=1, env=env)
    assert r.stdout.split() == ["123456789", "123456789"]
    assert fixed_time_environment(Program("clock", Build("x")), tmp_path, tools) == {}
    r, _ = run_binary(binary, (), tmp_path / "run", timeout=30, threads=1)
    assert int(r.stdout.split()[0]) > 1_600_000_000


# a program whose result never leaves memory: main hands it to finish() (another object file)
PROBED_CU = r"""
#include <cstdlib>
extern "C" void finish(const float *y, int n);
__global__ void cube(int n, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (float)i * i * i;
}
int main() {
    const int n = 100;
    float *y = (float *)malloc(n * sizeof(float)), *dy;
    cudaMalloc(&dy, n * sizeof(float));
    cube<<<4, 32>>>(n, dy);
    cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    finish(y, n);
    return 0;
}
"""
FINISH_C = "#include <stdlib.h>\nvoid finish(const float *y, int n) { (void)n; free((void *)y); }\n"
PROBED_REF_C = r"""
#include <stdlib.h>
void finish(const float *y, int n);
int main(void) {
    float *y = malloc(100 * sizeof(float));
    for (int i = 0; i < 100; i++) y[i] = (float)i * i * i OFFSET;
    finish(y, 100);
    return 0;
}
"""
PROBE = r"""
#include <stdio.h>
void __real_finish(const float *y, int n);
void __wrap_finish(const float *y, int n) {
    FILE *f = fopen("probe.txt", "w");
    for (int i = 0; i < n; i++) fprintf(f, "%g\n", y[i]);
    fclose(f);
    __real_finish(y, n);
}
"""


@needs_cxx
def test_a_probe_writes_results_a_program_never_prints_in_both_builds(tmp_path):
    """Build.probe (Rodinia backprop, kmeans): our C code wraps a function of the program at link
    time and writes what it is given; both builds' files are compared."""
    from bench.real_programs import Probe

    root = tmp_path / "suite"
    for name, files in {"p": {"cube.cu": PROBED_CU, "finish.c": FINISH_C},
                        "r_ok": {"ref.c": PROBED_REF_C.replace("OFFSET", ""), "finish.c": FINISH_C},
                        "r_off": {"ref.c": PROBED_REF_C.replace("OFFSET", "+ (i == 7)"), "finish.c": FINISH_C}}.items():
        (root / name).mkdir(parents=True)
        for file, text in files.items():
            (root / name / file).write_text(text)
    probe = Probe(("finish",), PROBE)
    ours = Build("p", cu=("cube.cu",), c=("finish.c",), probe=probe)
    programs = [Program(f"cube_{ref}", ours, (), None, Check("omp", Output("probe.txt"), rtol=1e-6, atol=0),
                        omp=Build(ref, c=("ref.c", "finish.c"), probe=probe)) for ref in ("r_ok", "r_off")]
    rows = {r.name: r for r in measure_suite(programs, root, Tools(threads=2))}
    assert (rows["cube_r_ok"].correct, rows["cube_r_ok"].blocker) == ("yes", "")
    assert rows["cube_r_off"].correct == "NO"
    assert rows["cube_r_off"].blocker == "correct: 1 of 100 numbers differ, first #7: 343 vs 344"


def test_write_avi_makes_the_riff_layout_avilib_reads(tmp_path):
    """bench.real_programs_rodinia.write_avi (the video leukocyte reads): RIFF 'AVI ' with hdrl
    (avih; strl: strh 'vids', strf BITMAPINFOHEADER with the size), movi of '00db' frames, idx1
    whose offsets (from the movi list's type field) point at those frames."""
    import struct

    from bench.real_programs_rodinia import write_avi

    frames = [bytes((i * 7 + f) % 256 for i in range(6 * 3)) for f in range(4)]
    path = tmp_path / "v.avi"
    write_avi(path, 6, 3, frames)
    data = path.read_bytes()
    assert data[:4] == b"RIFF" and data[8:12] == b"AVI " and struct.unpack_from("<I", data, 4)[0] == len(data) - 8
    chunks, at = {}, 12
    while at < len(data):
        tag, size = data[at:at + 4], struct.unpack_from("<I", data, at + 4)[0]
        key = tag + (data[at + 8:at + 12] if tag == b"LIST" else b"")
        chunks[key] = (at + 8, size)
        at += 8 + size + size % 2
    assert set(chunks) == {b"LISThdrl", b"LISTmovi", b"idx1"}
    hdrl_at, _ = chunks[b"LISThdrl"]
    hdrl = data[hdrl_at:]
    strh = hdrl.index(b"strh")
    assert hdrl[strh + 8:strh + 12] == b"vids" and struct.unpack_from("<I", hdrl, strh + 8 + 32)[0] == 4
    strf = hdrl.index(b"strf")
    assert struct.unpack_from("<iiHH", hdrl, strf + 8 + 4) == (6, 3, 1, 8)
    movi_at, _ = chunks[b"LISTmovi"]
    idx_at, idx_size = chunks[b"idx1"]
    assert idx_size == 16 * len(frames)
    for k, frame in enumerate(frames):
        tag, _, offset, length = struct.unpack_from("<4sIII", data, idx_at + 16 * k)
        assert (tag, length) == (b"00db", len(frame))
        chunk = movi_at + offset
        assert data[chunk:chunk + 4] == b"00db" and data[chunk + 8:chunk + 8 + length] == frame


@needs_cxx
def test_reference_threads_sets_the_reference_builds_thread_count_in_the_check(tmp_path):
    """Program.reference_threads (streamcluster: its OpenMP version's result depends on its thread
    count): the reference's correctness run gets that many OpenMP threads and {threads}."""
    root = tmp_path / "suite"
    (root / "good").mkdir(parents=True)
    (root / "good" / "square.cu").write_text(GOOD_CU)
    (root / "ref").mkdir()
    # squares, but off by one at i == 3 unless it runs on one thread (argument and environment)
    (root / "ref" / "ref.c").write_text(REF_C.replace(
        "OFFSET", "+ (i == 3 && (atoi(argv[3]) != 1 || atoi(getenv(\"OMP_NUM_THREADS\")) != 1))"))
    programs = [Program(f"square_{t}", Build("good", cu=("square.cu",)), ("{n}", "{x}"), _inputs,
                        Check("omp", Output("out.txt")), omp=Build("ref", c=("ref.c",)),
                        omp_args=("{n}", "{x}", "{threads}"), reference_threads=t) for t in (1, None)]
    rows = {r.name: r for r in measure_suite(programs, root, Tools(threads=2))}
    assert rows["square_1"].correct == "yes"
    assert rows["square_None"].correct == "NO"


@pytest.mark.parametrize("cpu_time", [False, True])
def test_timed_runs_take_turns_and_keep_each_versions_best(tmp_path, monkeypatch, cpu_time):
    calls: list[tuple[str, bool]] = []
    times = {"polypy": iter([0.5, 0.3, 0.4]), "omp": iter([0.2, 0.6, 0.25])}

    def fake_run(binary, args, run_dir, *, timeout, threads, env=None, cpu_time=False):
        calls.append((binary.name, cpu_time))
        return "", next(times[binary.name])

    monkeypatch.setattr(real_programs, "run_binary", fake_run)
    program = _suite(tmp_path / "suite")[0]
    runs = [(tmp_path / "polypy", (), tmp_path), (tmp_path / "omp", (), tmp_path)]
    best = real_programs._best_interleaved(runs, program, Tools(threads=1, cpu_time=cpu_time), 3)
    assert calls == [("polypy", cpu_time), ("omp", cpu_time)] * 3  # --cpu-time: each run's CPU time
    assert best == [0.3, 0.2]


# times a sleep with the three clocks a program may print its time with (PolyBench's
# gettimeofday, an OpenMP port's omp_get_wtime) and prints time(NULL)
SLEEPER_C = r"""
#include <omp.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
int main(void) {
    struct timeval a, b;
    gettimeofday(&a, NULL);
    double w = omp_get_wtime();
    usleep(300000);
    w = omp_get_wtime() - w;
    gettimeofday(&b, NULL);
    printf("%f %f %ld\n", (b.tv_sec - a.tv_sec) + 1e-6 * (b.tv_usec - a.tv_usec), w, (long)time(NULL));
    return 0;
}
"""


@needs_cxx
def test_cpu_time_reads_cpu_seconds_where_the_wall_clock_moves(tmp_path):
    """--cpu-time: the preloaded shim answers gettimeofday and omp_get_wtime with the process's
    CPU time (a 0.3 s sleep costs next to none), alongside the fixed-time shim; a whole run is
    timed by its CPU time. Without it both clocks and the run see the sleep."""
    import subprocess

    from bench import real_programs_clock as cpu_clock
    from bench.real_programs import fixed_time_environment, run_binary, shim_library

    (tmp_path / "sleeper.c").write_text(SLEEPER_C)
    binary = tmp_path / "sleeper"
    subprocess.run(["gcc", "-fopenmp", str(tmp_path / "sleeper.c"), "-o", str(binary)], check=True)
    tools = Tools(threads=1, cpu_time=True)
    pinned = fixed_time_environment(Program("s", Build("x"), fixed_time=123456789), tmp_path, tools)
    env = cpu_clock.with_preload(pinned, shim_library(tmp_path, "cpu_clock", cpu_clock.CPU_CLOCK_SHIM, tools))
    assert env["LD_PRELOAD"].count(":") == 1
    r, cpu = run_binary(binary, (), tmp_path / "run", timeout=30, threads=1, env=env, cpu_time=True)
    timeofday, wtime, now = r.stdout.split()
    assert float(timeofday) < 0.1 and float(wtime) < 0.1 and cpu < 0.1
    assert now == "123456789"
    r, wall = run_binary(binary, (), tmp_path / "run", timeout=30, threads=1)
    timeofday, wtime, now = r.stdout.split()
    assert float(timeofday) >= 0.29 and float(wtime) >= 0.29 and wall >= 0.29
    assert int(now) > 1_600_000_000


def test_cpu_time_needs_one_thread(tmp_path, monkeypatch):
    monkeypatch.setattr("bench.real_programs.load_suite", lambda name, path: [])
    with pytest.raises(SystemExit, match="--cpu-time needs --threads 1"):
        main(["polybench", str(tmp_path), "--time", "--cpu-time", "--threads", "2"])


# a program with its own CPU path (`-C`, as mummergpu has) and a C file of its own that needs a flag
OWN_CU = r"""
#include <cstdio>
#include <cstring>
extern "C" float helper_scale(void);
__global__ void scale(int n, float s, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * i;
}
int main(int argc, char** argv) {
    int n = 100;
    float s = helper_scale(), y[100];
    if (argc > 1 && strcmp(argv[1], "-C") == 0) {
        for (int i = 0; i < n; i++) y[i] = s * i + (OFF && i == 42 ? 1.0f : 0.0f);
    } else {
        float* d;
        cudaMalloc(&d, n * sizeof(float));
        scale<<<2, 64>>>(n, s, d);
        cudaMemcpy(y, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    }
    for (int i = 0; i < n; i++) printf("%g\n", y[i]);
    return 0;
}
"""


@needs_cxx
def test_own_cpu_path_is_the_reference_and_own_flags_reach_only_the_programs_files(tmp_path):
    root = tmp_path / "suite"
    programs = []
    for name, off in (("own_ok", "0"), ("own_off", "1")):
        (root / name).mkdir(parents=True)
        (root / name / "scale.cu").write_text(OWN_CU.replace("OFF", off))
        (root / name / "helper.c").write_text("float helper_scale(void) { return SCALE; }\n")
        build = Build(name, cu=("scale.cu",), c=("helper.c",), own_flags=("-DSCALE=3",))
        programs.append(Program(name, build, (), None, Check("own"), omp_args=("-C",)))
    rows = {r.name: r for r in measure_suite(programs, root, Tools(threads=2))}
    assert (rows["own_ok"].compile, rows["own_ok"].correct, rows["own_ok"].reference) == ("ok", "yes", "own CPU path")
    assert rows["own_off"].correct == "NO"
    assert rows["own_off"].blocker == "correct: 1 of 100 numbers differ, first #42: 126 vs 127"


# prints its own times the way PolyBench/GPU's older tree does, only when built with
# -DSELF_TIMED (Program.time_flags, which replace the build's -DNOT_TIMED); run k (a counter file in its directory) prints the k-th of
# three made-up times of each part, so that the best of the runs is known
SELF_TIMED_CU = r"""
#include <cstdio>
__global__ void twice(float *y) { y[threadIdx.x] *= 2.0f; }
int main() {
    int k = 0;
    FILE *c = fopen("count.txt", "r");
    if (c) { fscanf(c, "%d", &k); fclose(c); }
    c = fopen("count.txt", "w");
    fprintf(c, "%d\n", k + 1);
    fclose(c);
    float h[32], *d;
    for (int i = 0; i < 32; i++) h[i] = i;
    cudaMalloc(&d, sizeof h);
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    twice<<<1, 32>>>(d);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    const double gpu[3] = {0.5, 0.25, 0.4}, cpu[3] = {1.5, 2.0, 1.0};
#if defined(SELF_TIMED) && !defined(NOT_TIMED)
    printf("GPU Runtime: %0.6lfs\n", gpu[k % 3]);
    printf("CPU Runtime: %0.6lfs\n", cpu[k % 3]);
#endif
    printf("Non-Matching CPU-GPU Outputs Beyond Error Threshold of 0.05 Percent: %d\n", h[31] != 62.0f);
    return 0;
}
"""


def test_polybench_self_time_patterns_read_both_trees():
    from bench.real_programs_polybench import SELF_TIMES
    program = Program("p", Build("d"), self_times=SELF_TIMES)
    old = "GPU Runtime: 0.012345s\nNon-Matching ...: 0\nCPU Runtime: 1.250000s\n"
    new = "setting device\nGPU Time in seconds:\n0.003000\nCPU Time in seconds:\n0.750000\n"
    assert real_programs.self_times(program, old) == (0.012345, 1.25)
    assert real_programs.self_times(program, new) == (0.003, 0.75)
    with pytest.raises(real_programs.StepFailed, match="no time printed"):
        real_programs.self_times(program, "GPU Runtime: 0.1s\n")


@needs_cxx
def test_self_timed_program_keeps_the_best_of_each_printed_time(tmp_path):
    """--time for a program that times itself (PolyBench): the translated part's and the serial
    reference's printed times, each the best of --repeat runs (the checked run is the first),
    the ratio serial/polypy, and the programs below 1 listed."""
    from bench.real_programs_polybench import SELF_CHECK, SELF_TIMES
    root = tmp_path / "suite"
    (root / "st").mkdir(parents=True)
    (root / "st" / "st.cu").write_text(SELF_TIMED_CU)
    program = Program("st", Build("st", cu=("st.cu",), flags=("-DNOT_TIMED",)), check=Check("self", pattern=SELF_CHECK),
                      self_times=SELF_TIMES, time_flags=("-DSELF_TIMED",))
    [row] = measure_suite([program], root, Tools(threads=1), timed=True, repeat=3)
    assert (row.correct, row.blocker) == ("yes", "")
    assert (row.t_polypy, row.t_serial, row.t_omp) == (0.25, 1.0, None)
    assert row.ratio == 4.0
    table = format_table([row, Row("slow", "slow", "ok", "ok", "ok", "yes", t_polypy=2.0, t_serial=1.0)], timed=True)
    assert "| st | ok | ok | ok | yes | self-check | 0.250000 | 1.000000 | 4.00 |" in table
    assert "geomean t_serial / t_polypy (the times each program prints) over 2 programs" in table
    assert "below 1: slow" in table


def test_btree_cuda_build_makes_the_openmp_versions_tree_order():
    """Rodinia's CUDA b+tree takes its tree order from RD_WG_SIZE_0 (its Makefile's KERNEL_DIM,
    256 when unset); the OpenMP version's common.h fixes 508. At 256 the CUDA program's host code
    (the same main.c) builds a tree of twice the nodes, and its quadratic queue walk in
    transform_to_cuda took 0.5 s of CPU against 0.06 s: the comparison measured different work."""
    from bench.real_programs_rodinia import programs
    btree = next(p for p in programs(pathlib.Path("unused")) if p.name == "b+tree")
    assert "-DRD_WG_SIZE_0=508" in btree.build.flags
    assert not any(f.startswith("-DRD_WG_SIZE") for f in btree.omp.flags)
