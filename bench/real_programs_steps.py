"""The steps of bench/real_programs.py that run tools: translate, compile, run, the emulated reference.

Every step raises ``StepFailed`` (its ``str()`` the first error line) when what it runs fails;
``bench/real_programs.py`` turns the first failure of a program into its row's blocker.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
from typing import Mapping, Sequence

from bench import real_programs_clock as cpu_clock
from bench.real_programs_spec import Build, Program

CFLAGS = ("-O3", "-march=native", "-fopenmp")
CUDA_HEADERS = pathlib.Path(__file__).resolve().parents[1] / "polypy" / "runtime"  # polypy's cuda.h & co.


class StepFailed(Exception):
    """A step failed; ``str()`` is the first error line."""


def first_error(text: str, *, limit: int = 110) -> str:
    """The first line of ``text`` that says ``error`` (else its first non-empty line), with the
    temporary directory's path shortened to the file name and cut to ``limit`` characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    chosen = next((line for line in lines if "error" in line.lower() or "undefined reference" in line),
                  lines[0] if lines else "")
    chosen = re.sub(r"(/[^\s:]*/)([^/\s:]+)", r"\2", chosen)
    return chosen if len(chosen) <= limit else chosen[: limit - 3] + "..."


class NoInput(StepFailed):
    """The program needs an input file that no generator makes."""


def format_args(template: Sequence[str], params: Mapping[str, str], note: str = "") -> list[str]:
    try:
        return [a.format(**params) for a in template]
    except KeyError as exc:
        raise NoInput(note or f"no input generator for {exc}") from exc


@dataclasses.dataclass(frozen=True)
class Tools:
    """Commands the runner calls (overridable for tests)."""

    polypy: tuple[str, ...] = (sys.executable, "-m", "polypy.driver.cli")
    cc: str = "gcc"
    cxx: str = "g++"
    threads: int = 0
    translate_timeout_s: float = 300.0
    cpu_time: bool = False  # --cpu-time: times in CPU seconds (one thread; bench/real_programs_clock.py)

    @property
    def thread_count(self) -> int:
        return self.threads or len(os.sched_getaffinity(0))


def run_command(command: Sequence[str], *, cwd: pathlib.Path, timeout: float, env: Mapping[str, str] | None = None
         ) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(list(command), cwd=cwd, capture_output=True, text=True, errors="replace",
                              timeout=timeout, env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired as exc:
        raise StepFailed(f"timed out after {timeout:g} s: {' '.join(pathlib.Path(command[0]).name.split())}") from exc


def source_flags(build: Build, root: pathlib.Path) -> list[str]:
    src = root / build.directory
    out = []
    for f in build.flags:
        if f.startswith("-I") and not os.path.isabs(f[2:]):
            f = "-I" + str((src / f[2:]).resolve())
        out.append(f)
    return out


def translate(build: Build, root: pathlib.Path, work: pathlib.Path, tools: Tools) -> list[pathlib.Path]:
    """``polypy translate`` each .cu file into ``work``; returns the C++ files."""
    src = root / build.directory
    outputs = []
    for i, cu in enumerate(build.cu):
        out = work / f"t{i}_{pathlib.Path(cu).stem}.cpp"
        r = run_command([*tools.polypy, "translate", str(src / cu), "-o", str(out), *source_flags(build, root)],
                 cwd=work, timeout=tools.translate_timeout_s)
        if r.returncode != 0:
            raise StepFailed(first_error(r.stderr or r.stdout) or f"exit status {r.returncode}")
        outputs.append(out)
    return outputs


def compile_program(build: Build, root: pathlib.Path, work: pathlib.Path, tools: Tools, *,
                    translated: Sequence[pathlib.Path] | None, exe: str) -> pathlib.Path:
    """Compile and link. ``translated``: the C++ files polypy made from ``build.cu`` (None for a
    reference build, whose .cu files, if any, go to the C++ compiler as they are)."""
    src = root / build.directory
    # quoted includes of translated files are found next to their .cu source (-iquote: a
    # program's own unistd.h, as kmeans has, must not hide the system's <unistd.h>)
    flags = [*source_flags(build, root), "-iquote", str(src.resolve())]
    if translated is not None:
        # the Makefiles' -I$(CUDA_DIR)/include, for host files that include <cuda.h> themselves
        flags.append(f"-I{CUDA_HEADERS}")
    objects = []
    jobs: list[tuple[str, pathlib.Path]] = []
    if translated is not None:
        jobs += [(tools.cxx, p) for p in translated]
    else:
        jobs += [(tools.cxx, src / f) for f in build.cu]
    own = len(jobs)
    jobs += [(tools.cc, src / f) for f in build.c] + [(tools.cxx, src / f) for f in build.cxx]
    link_flags: list[str] = []
    if build.probe is not None:
        probe = work / f"{exe}_probe.c"
        probe.write_text(build.probe.source)
        jobs.append((tools.cc, probe))
        link_flags += [f"-Wl,--wrap={name}" for name in build.probe.wrap]
    for i, (compiler, path) in enumerate(jobs):
        obj = work / f"{exe}_{i}_{path.stem}.o"
        lang = ["-x", "c++"] if compiler == tools.cxx and path.suffix == ".cu" else []
        extra = list(build.own_flags) if own <= i < own + len(build.c) + len(build.cxx) else []
        r = run_command([compiler, *CFLAGS, *flags, "-w", *lang, *extra, "-c", str(path), "-o", str(obj)], cwd=work,
                 timeout=300)
        if r.returncode != 0:
            raise StepFailed(first_error(r.stderr or r.stdout))
        objects.append(str(obj))
    binary = work / exe
    r = run_command([tools.cxx, *CFLAGS, *link_flags, *objects, "-o", str(binary), *build.libs], cwd=work, timeout=300)
    if r.returncode != 0:
        raise StepFailed(first_error(r.stderr or r.stdout))
    return binary


def omp_environment(threads: int) -> dict[str, str]:
    """The same OpenMP settings for both versions. Passive waiting: on a loaded machine (more
    busy threads than cores) spinning threads make every barrier cost milliseconds, and
    programs that launch thousands of short kernels (cfd) take 50x longer for both."""
    return {"OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "passive"}


def run_directory(base: pathlib.Path, program: Program, inputs: pathlib.Path) -> pathlib.Path:
    """Where a program runs: ``base``, or for programs that open ``../../data/...`` themselves,
    that deep below ``base`` with a copy of the generated ``data`` in ``base`` (a copy: some
    write their output next to their input)."""
    base.mkdir(parents=True, exist_ok=True)
    if not program.cwd:
        return base
    if not (base / "data").exists() and (inputs / "data").exists():
        shutil.copytree(inputs / "data", base / "data")
    run_dir = base / program.cwd
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def shim_library(work: pathlib.Path, stem: str, source: str, tools: Tools) -> pathlib.Path:
    """A preloadable shim of ours (bench/real_programs_clock.py) compiled into ``work``, once."""
    try:
        return cpu_clock.shim_library(work, stem, source, tools.cc)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        raise StepFailed(f"{stem} shim: " + first_error(str(exc))) from exc


def fixed_time_environment(program: Program, work: pathlib.Path, tools: Tools) -> dict[str, str]:
    """``LD_PRELOAD`` of a shim of our own whose ``time()`` returns ``program.fixed_time``
    (compiled into ``work``), so that a program seeding rand() from the clock gets the same
    numbers in both versions; empty when the program keeps the real clock."""
    if program.fixed_time is None:
        return {}
    source = cpu_clock.FIXED_TIME_SHIM % (program.fixed_time, program.fixed_time)
    return {"LD_PRELOAD": str(shim_library(work, "fixed_time", source, tools))}


def run_binary(binary: pathlib.Path, args: Sequence[str], run_dir: pathlib.Path, *, timeout: float,
               threads: int, env: Mapping[str, str] | None = None, cpu_time: bool = False
               ) -> tuple[subprocess.CompletedProcess, float]:
    """Runs ``binary``; returns its result and its wall time, or with ``cpu_time`` its CPU time."""
    run_dir.mkdir(parents=True, exist_ok=True)
    clock = cpu_clock.children_cpu_seconds if cpu_time else time.perf_counter
    start = clock()
    r = run_command([str(binary), *args], cwd=run_dir, timeout=timeout, env={**omp_environment(threads), **(env or {})})
    elapsed = clock() - start
    (run_dir / ".stdout").write_text(r.stdout)  # kept with --keep, for a look at what differed
    (run_dir / ".stderr").write_text(r.stderr)
    if r.returncode != 0:
        tail = [line for line in (r.stderr + r.stdout).splitlines() if line.strip()]
        what = first_error("\n".join(tail[-3:])) if tail else ""
        raise StepFailed(f"exit status {r.returncode}" + (f": {what}" if what else ""))
    return r, elapsed


def run_emulated(program: Program, root: pathlib.Path, args: Sequence[str], run_dir: pathlib.Path,
                 tools: Tools, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """The program with every launch in the reference emulator: ``polypy run --emulate FILE
    [-D.. -I..] -- ARGS`` (single-file programs only)."""
    build = program.build
    if len(build.cu) != 1 or build.c or build.cxx:
        raise StepFailed("no reference: no OpenMP version, and the emulator runs single-file programs only")
    source = root / build.directory / build.cu[0]
    flags = [*source_flags(build, root), f"-I{(root / build.directory).resolve()}"]
    run_dir.mkdir(parents=True, exist_ok=True)
    r = run_command([*tools.polypy, "run", "--emulate", str(source), *flags, "--", *args], cwd=run_dir,
             timeout=max(program.timeout_s, 300), env={**omp_environment(tools.thread_count), **(env or {})})
    if r.returncode != 0:
        raise StepFailed("emulated reference failed: " + first_error(r.stderr or r.stdout))
    return r
