"""Real CUDA suites end to end: translate, build, run and check every program (issues 11, 14).

    python -m bench.real_programs rodinia PATH [--time] [--only a,b] [--json out.json]
    python -m bench.real_programs polybench PATH [--time --threads 1 [--cpu-time]] [--omp] [--only GEMM,2MM]
        [--json out.json]

PATH is a checkout of yuhc/gpu-rodinia (``cuda/<name>``, ``openmp/<name>``) or of
sgrauerg/polybenchGpu (``CUDA/<NAME>``, and the older versions of the same programs under
``polybenchCodesCudaOpenClHMPPOpenAcc/CUDA`` as ``old/<NAME>``, at the sizes hard-coded in them:
see ``bench/real_programs_polybench.py``). Nothing of the suites is in this
repository: ``bench/real_programs_rodinia.py`` and ``bench/real_programs_polybench.py`` only
*describe* each program (sources, the -D/-I flags its Makefile passes, command-line arguments,
a generator of small seeded inputs in the suite's own file formats, how to check its output).

Per program, in a fresh temporary directory:

1. ``polypy translate`` every .cu file of the program (with the Makefile's -D/-I flags);
2. compile the translated C++ and the program's own .c/.cpp host files with
   ``-O3 -march=native -fopenmp`` and link;
3. run it on the generated input with a timeout;
4. check the output against a reference: Rodinia's own OpenMP version built from
   ``openmp/<name>`` and run on the same input (numbers in its output compared with a
   tolerance), or, where there is none, the same program under ``polypy run --emulate``
   (every launch in the reference emulator) on a tiny input, or the program's own self-check
   (PolyBench prints how many GPU results differ from its CPU version).

The table has one row per program: translate / compile / run / correct / first blocker (the
first error line, shortened) / time polypy / time omp / ratio. ``--time`` runs both versions on
a larger input (same input for both), best of 3 (``--repeat``) whole-program wall times, the
two versions run in turn, and reports the geometric mean of t_omp / t_polypy over the programs
correct in both. A program that times itself (``Program.self_times``: PolyBench prints the time
of its GPU part and of its own serial CPU version) is timed by those printed times instead, each
the best of ``--repeat`` runs on the checked build and input (the checked run counts as the
first; built with its ``time_flags``: PolyBench's headers' default sizes), against its serial reference: t_serial / t_polypy,
and the programs below 1 listed. ``--cpu-time`` (with ``--threads 1``) makes every time CPU
seconds instead of wall seconds, far less moved by the other processes of a loaded machine
(``bench/real_programs_clock.py``).

The steps that run tools (translate, compile, run, the emulated reference) are
``bench/real_programs_steps.py``. Not a test: nothing here asserts anything;
``tests/test_real_programs_runner.py`` checks the machinery on a tiny suite of its own.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Callable, Mapping, Sequence

from bench import real_programs_clock as cpu_clock
from bench import real_programs_ports as ports
from bench.real_programs_spec import TIMING_LINES, Build, Check, Output, Probe, Program  # noqa: F401 (re-exported)
from bench.real_programs_steps import (CFLAGS, NoInput, StepFailed, Tools, compile_program,  # noqa: F401
                                        first_error, fixed_time_environment, format_args, run_binary,
                                        run_command, run_directory, run_emulated, shim_library, translate)
from bench.real_programs_table import Row, format_table, geomean, summary  # noqa: F401 (re-exported)

NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)\b", re.IGNORECASE)


# ---------------------------------------------------------------------------------------------
# small helpers

def numbers(text: str, out: Output) -> list[float]:
    """The numbers of ``text`` that ``out`` selects."""
    lines = text.splitlines()
    if out.start is not None:
        pattern = re.compile(out.start)
        at = next((i for i, line in enumerate(lines) if pattern.search(line)), None)
        lines = [] if at is None else lines[at + 1:]
    skips = [re.compile(s) for s in out.skip]
    lines = [line for line in lines if line.strip() and not any(s.search(line) for s in skips)]
    if out.keep is not None:
        lines = [line for line in lines if re.search(out.keep, line)]
    if out.last is not None:
        lines = lines[-out.last:]
    if out.after is not None:
        lines = [re.split(out.after, line, maxsplit=1)[-1] for line in lines]
    values = [float(tok) for line in lines for tok in NUMBER.findall(line)]
    if out.drop_last:
        values = values[:-out.drop_last]
    return sorted(values) if out.sort else values


def compare(ours: Sequence[float], theirs: Sequence[float], *, rtol: float, atol: float) -> str | None:
    """None when both lists agree within the tolerance, else what differs."""
    if not theirs:
        return "the reference printed no numbers"
    if len(ours) != len(theirs):
        return f"{len(ours)} numbers vs {len(theirs)} in the reference"
    bad = [i for i, (a, b) in enumerate(zip(ours, theirs))
           if not (a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= atol + rtol * abs(b))]
    if not bad:
        return None
    i = bad[0]
    return f"{len(bad)} of {len(ours)} numbers differ, first #{i}: {ours[i]:g} vs {theirs[i]:g}"


def read_output(run_dir: pathlib.Path, run: subprocess.CompletedProcess, out: Output) -> list[float]:
    if out.source in ("stdout", "stderr"):
        return numbers(getattr(run, out.source), out)
    path = run_dir / out.source
    if not path.exists():
        raise StepFailed(f"no output file {out.source}")
    return numbers(path.read_text(errors="replace"), out)


# ---------------------------------------------------------------------------------------------
# the steps

def _params(program: Program, directory: pathlib.Path, size: str, tools: Tools) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    params = dict(program.inputs(directory, size)) if program.inputs is not None else {}
    params.setdefault("threads", str(tools.thread_count))
    return params


def measure(program: Program, root: pathlib.Path, work: pathlib.Path, tools: Tools, *, timed: bool = False,
            repeat: int = 3, omp_ports: bool = False) -> Row:
    """Every step for one program; the first failure ends it and becomes the blocker. With
    ``timed``, a correct program (and its OpenMP version) is then timed on the ``time`` input.
    With ``omp_ports``, a program with an ``omp_port`` also has that port checked against what it
    copies back to the host, and timed with it."""
    row = Row(program.name, program.counted_as)
    port_name = program.omp_port if omp_ports else None
    kind = program.check.kind
    if kind == "omp" and program.omp is None:
        kind = "emulate"
    row.reference = {"omp": "openmp", "emulate": "emulator", "own": "own CPU path", "self": "self-check",
                     "none": "none"}[kind]
    step = "translate"
    try:
        build = program.build
        if timed and program.time_flags is not None:
            build = dataclasses.replace(build, flags=program.time_flags)
        translated = translate(build, root, work, tools)
        row.translate = "ok"
        step = "compile"
        binary = compile_program(build, root, work, tools, translated=translated, exe="polypy_prog")
        row.compile = "ok"
        step = "run"
        # the emulator is slow: a tiny input where it is the reference
        inputs = work / "inputs"
        params = _params(program, inputs, "tiny" if kind == "emulate" else "small", tools)
        args = format_args(program.args, params, program.note)
        ours_dir = run_directory(work / "run_polypy", program, inputs)
        clock = fixed_time_environment(program, work, tools)
        timing = clock if not tools.cpu_time else cpu_clock.with_preload(
            clock, shim_library(work, "cpu_clock", cpu_clock.CPU_CLOCK_SHIM, tools))
        # what the device returns to the host, written by polypy's runtime (ours and the emulated run)
        trace = {"POLYPY_TRACE_COPIES": "copies.txt"} if program.trace_copies else {}
        traced = {"POLYPY_TRACE_COPIES": "copies.txt"} if port_name else trace
        r, _ = run_binary(binary, args, ours_dir, timeout=program.timeout_s, threads=tools.thread_count,
                          env={**timing, **traced})
        row.run = "ok"
        step = "correct"
        ours = read_output(ours_dir, r, program.check.ours)
        ref_binary = None
        if kind == "self":
            _self_check(program.check, r.stdout)
        elif kind in ("omp", "emulate", "own"):
            step = "reference"
            if kind == "own":  # the same binary on its own CPU path (mummergpu -C)
                ref_dir = run_directory(work / "run_own", program, inputs)
                rr, _ = run_binary(binary, format_args(program.omp_args or (), params), ref_dir, timeout=program.timeout_s,
                                   threads=tools.thread_count, env=timing)
            elif kind == "omp":
                assert program.omp is not None
                ref_binary = compile_program(program.omp, root, work, tools, translated=None, exe="omp_prog")
                ref_dir = run_directory(work / "run_omp", program, inputs)
                ref_threads = program.reference_threads or tools.thread_count
                ref_args = format_args(program.omp_args if program.omp_args is not None else program.args,
                                   {**params, "threads": str(ref_threads)})
                rr, _ = run_binary(ref_binary, ref_args, ref_dir, timeout=program.timeout_s, threads=ref_threads,
                                   env=timing)
            else:
                ref_dir = run_directory(work / "run_emulated", program, inputs)
                rr = run_emulated(program, root, args, ref_dir, tools, env={**clock, **trace})
            step = "correct"
            theirs = read_output(ref_dir, rr, program.check.theirs or program.check.ours)
            diff = compare(ours, theirs, rtol=program.check.rtol, atol=program.check.atol)
            if diff is not None:
                raise StepFailed(diff)
        row.correct = "yes" if kind != "none" else "?"
        port = None
        if port_name is not None:
            step = "omp port"
            port = _check_port(port_name, program, build, work, ours_dir, tools, timing)
            row.port = "yes"
        if timed and program.self_times is not None:
            step = "time"
            row.t_polypy, row.t_serial, row.t_port = _best_self_times(
                r.stdout, program, (binary, args, ours_dir), tools, repeat, {**timing, **trace}, port)
        elif timed:
            step = "time"
            big = work / "inputs_time"
            params = _params(program, big, "time", tools)
            args = format_args(program.time_args if program.time_args is not None else program.args, params, program.note)
            runs = [(binary, args, run_directory(work / "time_polypy", program, big))]
            if program.omp is not None:
                if ref_binary is None:
                    ref_binary = compile_program(program.omp, root, work, tools, translated=None, exe="omp_prog")
                ref_args = format_args(program.omp_args if program.omp_args is not None else program.args, params)
                runs.append((ref_binary, ref_args, run_directory(work / "time_omp", program, big)))
            best = _best_interleaved(runs, program, tools, repeat, timing)
            row.t_polypy = best[0]
            if program.omp is not None:
                row.t_omp = best[1]
    except NoInput as exc:
        row.run = "n/a"
        row.blocker = f"input: {exc}"
    except StepFailed as exc:
        row.blocker = f"{step}: {exc}"
        if step == "translate":
            row.translate = "FAIL"
        elif step == "compile":
            row.compile = "FAIL"
        elif step == "run":
            row.run = "FAIL"
        elif step in ("correct", "reference"):
            row.correct = "NO" if step == "correct" else "?"
        elif step == "omp port":
            row.port = "NO"
    return row


def _check_port(name: str, program: Program, build: Build, work: pathlib.Path, run_dir: pathlib.Path,
                tools: Tools, env: Mapping[str, str] | None = None) -> tuple[pathlib.Path, str, pathlib.Path]:
    """Build our OpenMP port ``name`` (``bench/omp_polybench``) at the program's sizes, run it,
    and compare what it writes with the copies the program's checked run traced
    (``run_dir/copies.txt``). Returns the port's executable, its stdout and its run directory."""
    exe = work / "omp_port"
    r = run_command(ports.compile_command(name, build.flags, exe, tools.cc, CFLAGS), cwd=work, timeout=300)
    if r.returncode != 0:
        raise StepFailed("build: " + first_error(r.stderr or r.stdout))
    port_dir = work / "run_omp_port"
    output, trace = port_dir / "port_output.bin", run_dir / "copies.txt"
    rr, _ = run_binary(exe, [str(output)], port_dir, timeout=program.timeout_s, threads=tools.thread_count, env=env)
    try:
        diff = ports.compare_outputs(name, ports.read_port_output(output), ports.read_trace(trace))
    except (OSError, ValueError) as exc:
        raise StepFailed(str(exc)) from exc
    finally:  # at the headers' sizes these are large
        output.unlink(missing_ok=True)
        trace.unlink(missing_ok=True)
    if diff is not None:
        raise StepFailed(diff)
    return exe, rr.stdout, port_dir


def _self_check(check: Check, stdout: str) -> None:
    found = list(re.finditer(check.pattern or "$^", stdout))
    if not found:
        raise StepFailed("self-check line not printed")
    bad = [m for m in found if m.group("ok") != check.expect]
    if bad:
        m = bad[0]
        line = stdout[stdout.rfind("\n", 0, m.start()) + 1:].splitlines()[0]
        raise StepFailed(f"self-check: {line.strip()[:100]}")
    if check.absent is not None:
        m = re.search(check.absent, stdout)
        if m is not None:
            line = stdout[m.start():].splitlines()[0]
            raise StepFailed(f"self-check: {line.strip()[:80]}")


def _best_interleaved(runs: Sequence[tuple[pathlib.Path, Sequence[str], pathlib.Path]], program: Program,
                      tools: Tools, repeat: int, env: Mapping[str, str] | None = None) -> list[float]:
    """The best of ``repeat`` wall times of each (binary, arguments, directory), the versions run
    in turn (polypy, OpenMP, polypy, ...): a machine that slows down for a while slows both."""
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeat):
        for (binary, args, run_dir), mine in zip(runs, times):
            mine.append(run_binary(binary, args, run_dir, timeout=program.timeout_s, threads=tools.thread_count,
                                   env=env, cpu_time=tools.cpu_time)[1])
    return [min(t) for t in times]


def self_times(program: Program, stdout: str) -> tuple[float, float]:
    """The two times a program prints of itself (``program.self_times``): its translated part's
    and its serial reference's, in seconds."""
    assert program.self_times is not None
    found = []
    for pattern in program.self_times:
        m = re.search(pattern, stdout)
        if m is None:
            raise StepFailed(f"no time printed matching {pattern!r}")
        found.append(float(m.group("s")))
    return found[0], found[1]


def _best_self_times(first: str, program: Program, run: tuple[pathlib.Path, Sequence[str], pathlib.Path],
                     tools: Tools, repeat: int, env: Mapping[str, str] | None = None,
                     port: tuple[pathlib.Path, str, pathlib.Path] | None = None
                     ) -> tuple[float, float, float | None]:
    """The best of ``repeat`` runs of each printed time (``self_times``); ``first`` is the
    stdout of the checked run, which counts as the first of them. Each later run is checked
    again: a time of a wrong run is not a time. With ``port`` (our OpenMP port's executable, the
    stdout of its checked run, its directory), the port runs after each run of the program and
    its best printed time is the third value (else None)."""
    samples = [self_times(program, first)]
    port_stdouts = [port[1]] if port is not None else []
    binary, args, run_dir = run
    for _ in range(repeat - 1):
        r, _ = run_binary(binary, args, run_dir, timeout=program.timeout_s, threads=tools.thread_count, env=env)
        if program.check.kind == "self":
            _self_check(program.check, r.stdout)
        samples.append(self_times(program, r.stdout))
        if port is not None:
            pr, _ = run_binary(port[0], [], port[2], timeout=program.timeout_s, threads=tools.thread_count, env=env)
            port_stdouts.append(pr.stdout)
    try:
        port_best = min((ports.port_seconds(out) for out in port_stdouts), default=None)
    except ValueError as exc:
        raise StepFailed(str(exc)) from exc
    return min(s[0] for s in samples), min(s[1] for s in samples), port_best


def measure_suite(programs: Sequence[Program], root: pathlib.Path, tools: Tools, *, timed: bool = False,
                  keep: pathlib.Path | None = None, progress: Callable[[str], None] | None = None,
                  repeat: int = 3, omp_ports: bool = False) -> list[Row]:
    rows = []
    for i, program in enumerate(programs):
        if progress is not None:
            progress(f"[{i + 1}/{len(programs)}] {program.name} ... ")
        start = time.perf_counter()
        base = keep if keep is not None else pathlib.Path(tempfile.mkdtemp(prefix="polypy-real-"))
        work = base / program.name.replace("/", "_")
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        try:
            row = measure(program, root, work, tools, timed=timed, repeat=repeat, omp_ports=omp_ports)
        finally:
            if keep is None:
                shutil.rmtree(base, ignore_errors=True)
        rows.append(row)
        if progress is not None:
            progress(f"{row.correct if row.correct != '-' else 'FAIL'} ({time.perf_counter() - start:.1f} s) "
                     f"{row.blocker}\n")
    return rows


def load_suite(name: str, root: pathlib.Path) -> list[Program]:
    if name == "rodinia":
        from bench.real_programs_rodinia import programs
    elif name == "polybench":
        from bench.real_programs_polybench import programs
    else:
        raise SystemExit(f"unknown suite {name!r} (rodinia, polybench)")
    return programs(root)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.real_programs", description=__doc__.split("\n\n")[0])
    p.add_argument("suite", choices=("rodinia", "polybench"))
    p.add_argument("path", type=pathlib.Path, help="checkout of yuhc/gpu-rodinia or sgrauerg/polybenchGpu")
    p.add_argument("--time", action="store_true",
                   help="larger inputs, best of --repeat runs, polypy vs the OpenMP version (run in turn); "
                        "PolyBench: the times each program prints of its GPU part and its serial CPU version")
    p.add_argument("--omp", action="store_true",
                   help="PolyBench: also build our plain OpenMP port of each program's serial version "
                        "(bench/omp_polybench), check it against the translated program, and with --time time it")
    p.add_argument("--repeat", type=int, default=3, help="timed runs of each version with --time (default 3)")
    p.add_argument("--only", default="", help="comma-separated program names")
    p.add_argument("--json", type=pathlib.Path, default=None, help="write the rows and the summary as JSON")
    p.add_argument("--threads", type=int, default=0, help="OpenMP threads for both versions, and so polypy's threads (0: all usable cores)")
    p.add_argument("--cpu-time", action="store_true",
                   help="with --time and --threads 1: CPU seconds, not wall seconds (bench/real_programs_clock.py)")
    p.add_argument("--keep", type=pathlib.Path, default=None, help="keep the work directories under this path")
    p.add_argument("--list", action="store_true", help="list the programs and exit")
    args = p.parse_args(argv)
    root = args.path.resolve()
    if not root.is_dir():
        raise SystemExit(f"{args.path}: not a directory")
    programs = load_suite(args.suite, root)
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        unknown = [w for w in wanted if not any(w in (q.name, q.counted_as) for q in programs)]
        if unknown:
            raise SystemExit(f"unknown program(s): {', '.join(unknown)}")
        programs = [q for q in programs if q.name in wanted or q.counted_as in wanted]
    if args.list:
        for q in programs:
            print(f"{q.name:24} {q.build.directory:32} {' '.join(q.args)}  [{q.check.kind}] {q.note}")
        return 0
    tools = Tools(threads=args.threads, cpu_time=args.cpu_time)
    if args.cpu_time and tools.thread_count != 1:
        raise SystemExit("--cpu-time needs --threads 1 (the CPU time of several threads is their sum)")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = os.getloadavg()[0]
    rows = measure_suite(programs, root, tools, timed=args.time, keep=args.keep, repeat=args.repeat,
                         omp_ports=args.omp, progress=lambda s: (sys.stderr.write(s), sys.stderr.flush()))
    print(format_table(rows, timed=args.time))
    if args.time and tools.cpu_time:
        print("times: CPU seconds of the one thread (--cpu-time), not wall seconds")
    if args.json is not None:
        doc = {"kind": "real_programs", "suite": args.suite, "timed": args.time, "date": started,
               "threads": tools.thread_count, "clock": "cpu" if tools.cpu_time else "wall",
               "cflags": list(CFLAGS), "summary": summary(rows),
               "load_average": {"start": load_start, "end": os.getloadavg()[0]},
               "rows": [r.as_dict() for r in rows]}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
