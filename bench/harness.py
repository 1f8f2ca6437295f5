"""The benchmark harness: inputs, correctness gate, timing, for every (kernel, variant) pair.

For each sample in ``BENCH_SIZES``: make the inputs with the sample's ``make_args`` at the
benchmark launch, compute the expected outputs once (the sample's NumPy ``reference``, or its
scalable stand-in from ``bench.references``), then for each variant: build it (untimed), run it
once on a fresh copy of the inputs and compare with the expected outputs under the sample's
tolerances -- a variant that is wrong is reported WRONG and never timed -- and time the correct
ones best-of-N, interleaved (``bench.timing``). A STREAM triad measured in the same run, before
every kernel and after the last, gives the bandwidth yardstick.

Sizes: ``full`` (the benchmark), ``quick`` (about an eighth of the work, ``--quick``) or ``small``
(the sample's largest test case and a small STREAM, ``--small``: seconds in all; its times say
little, it exists to exercise the whole machinery, as the tests do).
"""
from __future__ import annotations

import dataclasses
import math
import os
import platform
import subprocess
import time
from typing import Any, Callable, Mapping

import numpy as np

from bench.build import CFLAGS, compiler
from bench.progress import Progress
from bench.references import SCALABLE_REFERENCES
from bench.sizes import BENCH_SIZES, BenchSpec
from bench.timing import Timing, time_interleaved
from bench.runner import Factory, Runner, Skip, threads
from samples.spec import Case, Sample, all_samples

STREAM_ELEMENTS = 8 << 20  # doubles per STREAM array: 3 x 64 MiB
STREAM_RUNS = 20
SMALL_STREAM_ELEMENTS = 1 << 20  # --small: 3 x 8 MiB, 3 runs (beyond the caches of most machines)
SMALL_STREAM_RUNS = 3
SIZES = ("full", "quick", "small")
SEED = 20240601


@dataclasses.dataclass(frozen=True)
class TimingOptions:
    repeat: int = 10       # timed runs per variant (at most)
    warmup: int = 1        # untimed runs after the correctness run
    budget_s: float = 2.0  # a variant stops once its timed runs add up to this


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One variant on one kernel: "ok" (timed), "wrong", "skip" or "error".

    ``correct``: the correctness gate's verdict (None where the variant never got that far)."""

    status: str
    timing: Timing | None = None
    message: str = ""
    correct: bool | None = None


@dataclasses.dataclass(frozen=True)
class KernelResult:
    sample: str
    case: Case
    bytes: int
    flops: int | None
    memory_bound: bool
    outcomes: dict[str, Outcome]


@dataclasses.dataclass(frozen=True)
class StreamResult:
    gbs: float            # best of all measurements: the yardstick
    measurements: tuple[float, ...]
    elements: int         # doubles per array


@dataclasses.dataclass(frozen=True)
class BenchReport:
    stream: StreamResult
    threads: int
    size: str  # one of SIZES
    machine: dict[str, Any]
    results: tuple[KernelResult, ...]
    variants: tuple[str, ...]


# --------------------------------------------------------------------------- inputs and checks


def bench_samples(only: list[str] | None = None) -> list[Sample]:
    """The samples with a ``BENCH_SIZES`` entry (all of them, or those named in ``only``)."""
    samples = {s.name: s for s in all_samples() if s.name in BENCH_SIZES}
    if only is None:
        return list(samples.values())
    unknown = [name for name in only if name not in samples]
    if unknown:
        raise KeyError(f"no benchmark for {', '.join(unknown)} (have: {', '.join(samples)})")
    return [samples[name] for name in only]


def bench_case(sample: Sample, spec: BenchSpec, size: str) -> Case:
    """The launch for ``size``: the benchmark's full or quick one, or the sample's largest test case."""
    if size == "small":
        return max(sample.cases, key=lambda c: (math.prod(c.grid) * math.prod(c.block), sorted(c.sizes.items())))
    if size not in SIZES:
        raise ValueError(f"size {size!r} is not one of {', '.join(SIZES)}")
    return spec.case(quick=size == "quick")


def bench_reference(sample: Sample) -> Callable[[dict[str, Any], Case], dict[str, np.ndarray]]:
    """The reference used at benchmark sizes (the sample's own, unless it does not scale)."""
    return SCALABLE_REFERENCES.get(sample.name, sample.reference)


def fresh(args: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the arguments whose arrays the next run may overwrite."""
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def mismatch(sample: Sample, args: Mapping[str, Any], expected: Mapping[str, np.ndarray]) -> str | None:
    """None when every output matches within the sample's tolerances, else what differs."""
    problems = []
    for name in sample.outputs:
        got = np.asarray(args[name], dtype=np.float64).reshape(-1)
        want = np.asarray(expected[name], dtype=np.float64).reshape(-1)
        if got.shape != want.shape:
            problems.append(f"{name}: {got.size} elements, expected {want.size}")
            continue
        bad = ~np.isclose(got, want, rtol=sample.rtol, atol=sample.atol)
        if bad.any():
            i = int(np.argmax(bad))
            err = np.abs(got - want)
            problems.append(f"{name}: {int(bad.sum())} of {got.size} elements off (first at {i}: got {got[i]:.7g}, "
                            f"expected {want[i]:.7g}; max abs error {float(err.max()):.3g})")
    return "; ".join(problems) or None


# --------------------------------------------------------------------------- running


def prepare_variant(factory: Factory, sample: Sample, case: Case, pristine: Mapping[str, Any],
                    expected: Mapping[str, np.ndarray]) -> tuple[Runner, dict[str, Any]] | Outcome:
    """Build one variant and gate it on correctness: its runner and its own copy of the inputs
    (already run once), or the outcome that keeps it from being timed."""
    try:
        run = factory(sample, case)
        args = fresh(pristine)
        run(args)
    except Skip as e:
        return Outcome("skip", message=str(e))
    except Exception as e:  # a variant's failure is a result to report, not the end of the run
        return Outcome("error", message=f"{type(e).__name__}: {e}")
    wrong = mismatch(sample, args, expected)
    if wrong is not None:
        return Outcome("wrong", message=wrong, correct=False)
    return run, args


def run_kernel(sample: Sample, spec: BenchSpec, variants: Mapping[str, Factory], *, size: str,
               options: TimingOptions, progress: Progress) -> KernelResult:
    """One kernel: inputs, expected outputs, every variant checked, the correct ones timed."""
    case = bench_case(sample, spec, size)
    pristine = sample.make_args(np.random.default_rng(SEED), case, np.float32)
    expected = bench_reference(sample)(fresh(pristine), case)
    outcomes: dict[str, Outcome] = {}
    runners: dict[str, tuple[Runner, dict[str, Any]]] = {}
    for i, (name, factory) in enumerate(variants.items()):
        progress.note(f"{name} ...")
        prepared = prepare_variant(factory, sample, case, pristine, expected)
        if isinstance(prepared, Outcome):
            outcomes[name] = prepared
        else:
            runners[name] = prepared
        shown = NOT_TIMED.get(prepared.status, prepared.status) if isinstance(prepared, Outcome) else "ok"
        progress.note(shown + ("," if i < len(variants) - 1 else ";"))
    progress.note(f"timing {len(runners)} ...")
    timings = time_interleaved(runners, repeat=options.repeat, warmup=options.warmup, budget_s=options.budget_s)
    for name, timing in timings.items():
        outcomes[name] = (Outcome("ok", timing=timing, correct=True) if isinstance(timing, Timing)
                          else Outcome("error", message=f"while timing: {type(timing).__name__}: {timing}",
                                       correct=True))
    outcomes = {name: outcomes[name] for name in variants}  # the table's column order
    timed = sum(o.status == "ok" for o in outcomes.values())
    progress.end(f"done, {timed} of {len(outcomes)} timed")
    return KernelResult(sample.name, case, spec.bytes(pristine, case),
                        spec.flops(pristine, case) if spec.flops else None, spec.memory_bound, outcomes)


NOT_TIMED = {"wrong": "WRONG", "skip": "skip", "error": "ERROR"}


def stream_size(size: str) -> tuple[int, int]:
    """(doubles per STREAM array, runs) for a run at ``size``."""
    return (SMALL_STREAM_ELEMENTS, SMALL_STREAM_RUNS) if size == "small" else (STREAM_ELEMENTS, STREAM_RUNS)


def measure_stream(size: str = "full") -> float:
    from bench.omp_ports import measure_stream as triad

    gbs, _ = triad(*stream_size(size))
    return gbs


def run_benchmarks(samples: list[Sample], variants: Mapping[str, Factory], *, size: str = "full",
                   options: TimingOptions = TimingOptions(),
                   progress: Progress | None = None) -> BenchReport:
    """Everything: each kernel under each variant, with a STREAM triad before every kernel and
    after the last; the best triad is the yardstick (on a shared machine the bandwidth available
    varies over a run, and the best figure is the one closest to what the hardware can do)."""
    from bench.omp_ports import set_threads

    if progress is None:
        progress = Progress(len(samples), enabled=False)
    set_threads(threads())
    machine = machine_info()
    stream: list[float] = []
    results = []
    for s in samples:
        progress.start(s.name)
        stream.append(measure_stream(size))
        progress.note(f"stream {stream[-1]:.1f} GB/s;")
        results.append(run_kernel(s, BENCH_SIZES[s.name], variants, size=size, options=options, progress=progress))
    stream.append(measure_stream(size))
    progress.line(f"STREAM triad after the last kernel: {stream[-1]:.1f} GB/s")
    machine["loadavg_end"] = os.getloadavg()
    return BenchReport(StreamResult(max(stream), tuple(stream), stream_size(size)[0]), threads(), size, machine,
                       tuple(results), tuple(variants))


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on (recorded in the JSON)."""
    cc = compiler()
    try:
        cc_version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        cc_version = "unknown"
    return {
        "cpu": _cpu_model(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "threads": threads(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cc": cc_version,
        "cflags": " ".join(CFLAGS),
        "env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES",
                                           "OPENBLAS_NUM_THREADS") if k in os.environ},
        "loadavg_start": os.getloadavg(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
