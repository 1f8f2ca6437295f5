"""What ``bench/real_programs.py`` knows about one program of a suite: how to build it, run it
and check its output. The suite descriptions (``real_programs_rodinia.py``,
``real_programs_polybench.py``) are tables of these."""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Callable, Mapping

# Lines that hold timings or machine-dependent text, dropped before numbers are compared.
TIMING_LINES = (r"(?i)\btime", r"(?i)\bsec(ond)?s?\b", r"(?i)\bms\b", r"(?i)exec:", r"(?i)timer", r"(?i)elapsed",
                r"(?i)device", r"(?i)\bthreads?\b", r"(?i)\bWG size", r"(?i)GPU\b.*name")


@dataclasses.dataclass(frozen=True)
class Probe:
    """Results a program computes but never prints, written out by C code of ours linked in with
    ``ld --wrap``: ``source`` defines ``__wrap_<name>`` for each of ``wrap``, which records what
    it is given (or what ``__real_<name>`` returns) in a file of the working directory, and
    calls ``__real_<name>``. Nothing of the program changes; only calls from one of its object
    files to a function of another are wrapped (as ``--wrap`` does). ``source`` may include the
    program's own headers (it is compiled with the build's flags, quoted includes found in its
    directory). The same probe in a program's build and its reference build makes their results
    comparable."""

    wrap: tuple[str, ...]
    source: str


@dataclasses.dataclass(frozen=True)
class Build:
    """How one version of a program is built: sources relative to ``directory`` (itself relative
    to the suite root). ``cu`` files go through ``polypy translate`` (or, for a reference build,
    through the C++ compiler as they are); ``c`` files through the C compiler, ``cxx`` files
    through the C++ compiler. ``flags`` are the -D/-I flags of the Makefile (relative -I paths
    are relative to ``directory``)."""

    directory: str
    cu: tuple[str, ...] = ()
    c: tuple[str, ...] = ()
    cxx: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    libs: tuple[str, ...] = ("-lm",)
    probe: Probe | None = None
    # flags for the program's own .c/.cpp files only, after the others (mummergpu's suffix-tree.cpp
    # calls read() without <unistd.h>, and crashes when optimized: `-include unistd.h -O0`)
    own_flags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Output:
    """Which numbers of a run are compared: those of ``source`` (``stdout``, ``stderr`` or a file the
    program writes in its working directory), from the first line matching ``start`` on (the
    line itself excluded), dropping lines matching any of ``skip`` (and, with ``keep``, lines not
    matching it); ``last`` keeps only the last that many lines; ``after``: only the numbers after
    this pattern in each line; ``sort``: compared as a sorted list (an order the program leaves
    open); ``drop_last``: that many final numbers are not compared (values a program computes
    from memory it never initialized)."""

    source: str = "stdout"
    start: str | None = None
    skip: tuple[str, ...] = TIMING_LINES
    last: int | None = None
    keep: str | None = None
    after: str | None = None
    sort: bool = False
    drop_last: int = 0


@dataclasses.dataclass(frozen=True)
class Check:
    """How a run is judged. ``kind``: ``omp`` (the reference build, ``Program.omp``, run with
    ``Program.omp_args``: ``ours`` of our run against ``theirs`` of its run), ``emulate`` (the
    same program under the emulator: ``ours`` of both), ``own`` (the program's own CPU path: our
    binary run with ``Program.omp_args``, mummergpu's ``-C``), ``self`` (``pattern`` must match
    our stdout, with its group ``ok`` equal to ``expect``), or ``none``."""

    kind: str = "emulate"
    ours: Output = Output()
    theirs: Output | None = None
    pattern: str | None = None
    expect: str = "0"
    absent: str | None = None  # ``self``: a pattern that must not occur in our stdout
    rtol: float = 1e-3
    atol: float = 1e-4


@dataclasses.dataclass(frozen=True)
class Program:
    """One program of a suite. ``args`` and ``omp_args`` are templates formatted with the
    parameters that ``inputs(directory, size)`` returns (``size`` is ``small``, ``tiny`` for an
    emulated reference, or ``time``; it writes input files into ``directory`` and returns their
    paths and the sizes, as strings); ``{threads}`` is the OpenMP thread count."""

    name: str
    build: Build
    args: tuple[str, ...] = ()
    inputs: Callable[[pathlib.Path, str], Mapping[str, str]] | None = None
    check: Check = Check()
    omp: Build | None = None
    omp_args: tuple[str, ...] | None = None
    benchmark: str | None = None  # the suite's benchmark this program counts for (srad: v1 and v2)
    note: str = ""
    timeout_s: float = 60.0
    cwd: str = ""  # run in this subdirectory of the run directory, with ``data`` beside its top
    time_args: tuple[str, ...] | None = None  # ``args`` for --time (None: the same; lud: without -v)
    # time(): this constant in every run of both versions (a preloaded shim; lavaMD seeds rand()
    # from time(NULL)); None: the real clock
    fixed_time: int | None = None
    # POLYPY_TRACE_COPIES=copies.txt in the checked runs (ours and the emulated reference), for
    # programs that print nothing of what the device computed: Check("emulate", Output("copies.txt"))
    trace_copies: bool = False
    # OpenMP threads of the reference build in the correctness run (None: as many as the timed
    # runs use); for a reference whose result depends on its thread count (streamcluster)
    reference_threads: int | None = None
    # --time for a program that times its own parts (PolyBench: its kernels and its serial CPU
    # version): two patterns, each with a group ``s`` (seconds) matched in its stdout, the
    # translated part's and the serial reference's
    self_times: tuple[str, str] | None = None
    # the build's -D/-I flags with --time (None: ``build.flags``); PolyBench's new tree: no size
    # flags (the headers' default sizes) and -DPOLYBENCH_TIME (without it nothing is timed)
    time_flags: tuple[str, ...] | None = None
    # with --omp: our plain OpenMP port of the program's serial version, bench/omp_polybench/NAME.c
    # (bench/real_programs_ports.py), checked against what the program copies back and timed with it
    omp_port: str | None = None

    @property
    def counted_as(self) -> str:
        return self.benchmark or self.name
