"""The results side by side: printed tables and a JSON file.

Three tables, rows = kernels: best time per variant (ms); speed relative to the hand-written
OpenMP port, t_omp / t_variant (above 1: the variant is faster), with the geometric mean over
the kernels both ran; and throughput -- for memory-bound kernels the achieved bandwidth as a
percentage of the STREAM triad measured in the same run, for the others GFLOP/s where a flop
count is defined. A cell that is not a measurement says why: WRONG (failed the correctness
check, not timed), skip, ERROR; the reasons follow the tables.
"""
from __future__ import annotations

import dataclasses
import math
import pathlib
from typing import Any

from bench.harness import NOT_TIMED, BenchReport, KernelResult, Outcome
from bench.jsonfile import write_results
from bench.variants import BASELINE

NUMPY = "numpy"  # the second yardstick: ratios t_numpy / t_variant


def _size(result: KernelResult) -> str:
    return ",".join(f"{k}={v}" for k, v in result.case.sizes.items())


def _cell(outcome: Outcome | None, value: float | None, fmt: str) -> str:
    if outcome is None:
        return "-"
    if outcome.status != "ok":
        return NOT_TIMED[outcome.status]
    return fmt.format(value) if value is not None else "-"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(row: list[str]) -> str:  # names left-aligned, numbers right-aligned
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])


def _best(outcome: Outcome | None) -> float | None:
    return outcome.timing.best if outcome is not None and outcome.timing is not None else None


def _ms(outcome: Outcome | None) -> float | None:
    best = _best(outcome)
    return best * 1e3 if best is not None else None


def speedup(result: KernelResult, variant: str, baseline: str = BASELINE) -> float | None:
    """t_baseline / t_variant (default t_omp / t_variant), when both were timed."""
    base, mine = _best(result.outcomes.get(baseline)), _best(result.outcomes.get(variant))
    return base / mine if base is not None and mine is not None else None


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def format_report(report: BenchReport) -> str:
    variants = list(report.variants)
    others = [v for v in variants if v != BASELINE]
    head = ["kernel", "size"]
    times = [[r.sample, _size(r)] + [_cell(r.outcomes.get(v), _ms(r.outcomes.get(v)), "{:.2f}")
                                      for v in variants] for r in report.results]
    ratios = [[r.sample, _size(r)] + [_cell(r.outcomes.get(v), speedup(r, v), "{:.2f}x") for v in others]
              for r in report.results]
    means = [geomean([s for r in report.results if (s := speedup(r, v)) is not None]) for v in others]
    ratios.append(["geomean", ""] + [f"{m:.2f}x" if m is not None else "-" for m in means])
    throughput = []
    for r in report.results:
        unit = "%STREAM" if r.memory_bound else ("GFLOP/s" if r.flops else "")
        row = [r.sample, unit]
        for v in variants:
            best = _best(r.outcomes.get(v))
            value = None
            if best is not None and r.memory_bound:
                value = 100 * r.bytes / best / 1e9 / report.stream.gbs
            elif best is not None and r.flops:
                value = r.flops / best / 1e9
            row.append(_cell(r.outcomes.get(v), value, "{:.0f}%" if r.memory_bound else "{:.1f}"))
        throughput.append(row)

    parts = [
        *_header(report),
        "",
        "Best time per launch (ms)",
        _table(head + variants, times),
        "",
        f"Speed relative to the hand-written OpenMP port: t_{BASELINE} / t_variant (>1: faster than {BASELINE})",
        _table(head + [f"{BASELINE}/{v}" for v in others], ratios),
        "",
        "Throughput: memory-bound kernels as % of the STREAM triad, compute-bound ones in GFLOP/s",
        _table(["kernel", "unit"] + variants, throughput),
    ]
    notes = _notes(report)
    if notes:
        parts += ["", "Not timed:", *notes]
    return "\n".join(parts)


def _header(report: BenchReport) -> list[str]:
    stream, load = report.stream, report.machine["loadavg_start"][0]
    busy = " -- the machine was busy, timings are noisy" if load > report.machine["cores"] else ""
    return [f"STREAM triad (double, 3 x {stream.elements * 8 >> 20} MiB, {report.threads} threads): "
            f"{stream.gbs:.1f} GB/s (best of {len(stream.measurements)} measurements; lowest "
            f"{min(stream.measurements):.1f})",
            f"{report.machine['cpu']}, {report.machine['cores']} cores, {report.threads} threads, "
            f"load average {load:.1f} at start{busy}"]


def _notes(report: BenchReport) -> list[str]:
    """One line per (variant, reason); a reason shared by every kernel is said once."""
    lines = []
    for v in report.variants:
        reasons: dict[tuple[str, str], list[str]] = {}
        for r in report.results:
            o = r.outcomes.get(v)
            if o is not None and o.status != "ok":
                reasons.setdefault((o.status, o.message), []).append(r.sample)
        for (status, message), kernels in reasons.items():
            where = "all kernels" if len(kernels) == len(report.results) else ", ".join(kernels)
            lines.append(f"  {v} [{NOT_TIMED[status]}] on {where}: {message}")
    return lines


def to_json(report: BenchReport) -> dict[str, Any]:
    """The report as a JSON document (``bench.jsonfile``): machine, STREAM, and per kernel per
    variant the gate's verdict, every timed run, and the ratios t_omp / t_variant and
    t_numpy / t_variant (above 1: the variant is faster)."""
    kernels = []
    for r in report.results:
        variants = {}
        for v, o in r.outcomes.items():
            entry: dict[str, Any] = {"status": o.status, "correct": o.correct, "message": o.message}
            if o.timing is not None:
                best = o.timing.best
                entry.update(best_s=best, median_s=o.timing.median, runs_s=list(o.timing.runs),
                             gb_per_s=r.bytes / best / 1e9, stream_fraction=r.bytes / best / 1e9 / report.stream.gbs,
                             gflop_per_s=(r.flops / best / 1e9) if r.flops else None,
                             ratio_vs_omp=speedup(r, v), ratio_vs_numpy=speedup(r, v, NUMPY))
            variants[v] = entry
        kernels.append({"kernel": r.sample, "grid": list(r.case.grid), "block": list(r.case.block),
                        "shmem": r.case.shmem, "sizes": dict(r.case.sizes), "bytes": r.bytes, "flops": r.flops,
                        "memory_bound": r.memory_bound, "variants": variants})

    def means(baseline: str) -> dict[str, float | None]:
        return {v: geomean([s for r in report.results if (s := speedup(r, v, baseline)) is not None])
                for v in report.variants if v != baseline}

    return {
        "kind": "bench",
        "size": report.size,
        "threads": report.threads,
        "machine": {**report.machine, "stream_gbs": report.stream.gbs},
        "stream": dataclasses.asdict(report.stream),
        "variants": list(report.variants),
        "baseline": BASELINE,
        "geomean_ratio_vs_omp": means(BASELINE),
        "geomean_ratio_vs_numpy": means(NUMPY) if NUMPY in report.variants else {},
        "kernels": kernels,
    }


def write_json(report: BenchReport, path: pathlib.Path | None = None, *,
               extra: dict[str, Any] | None = None) -> pathlib.Path:
    """Write the report (default: ``bench/results/bench-<timestamp>.json``), with ``extra``
    sections (``grad``) merged in, and return the path."""
    suffix = "" if report.size == "full" else f"-{report.size}"
    return write_results({**to_json(report), **(extra or {})}, path, prefix="bench", suffix=suffix)
