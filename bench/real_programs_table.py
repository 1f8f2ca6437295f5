"""The table of ``bench/real_programs.py``: one row per program (what happened to it, its
times) and the summary over a suite."""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence


@dataclasses.dataclass
class Row:
    """What happened to one program."""

    name: str
    benchmark: str
    translate: str = "-"
    compile: str = "-"
    run: str = "-"
    correct: str = "-"
    reference: str = "-"
    blocker: str = ""
    t_polypy: float | None = None
    t_omp: float | None = None
    t_serial: float | None = None  # the program's own serial reference, as it prints it
    port: str = "-"  # --omp: whether our OpenMP port's output matches the program's (yes / NO / -)
    t_port: float | None = None  # --omp --time: our OpenMP port's time, as it prints it

    @property
    def ratio(self) -> float | None:
        reference = self.t_omp or self.t_serial
        if self.t_polypy and reference:
            return reference / self.t_polypy
        return None

    @property
    def port_ratio(self) -> float | None:
        """t_omp / t_polypy against our plain OpenMP port (``--omp --time``)."""
        if self.t_polypy and self.t_port:
            return self.t_port / self.t_polypy
        return None

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "ratio": self.ratio, "port_ratio": self.port_ratio}


def geomean(values: Sequence[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(rows: Sequence[Row]) -> dict:
    """Counts per benchmark: a benchmark counts as correct when every program of it is."""
    benchmarks: dict[str, list[Row]] = {}
    for row in rows:
        benchmarks.setdefault(row.benchmark, []).append(row)

    def count(field: str) -> int:
        good = {"translate": ("ok",), "compile": ("ok",), "run": ("ok",), "correct": ("yes",)}[field]
        return sum(all(getattr(r, field) in good for r in rs) for rs in benchmarks.values())

    ported = [r for r in rows if r.port_ratio is not None and r.correct == "yes" and r.port == "yes"]
    return {"programs": len(rows), "benchmarks": len(benchmarks),
            "translate": count("translate"), "compile": count("compile"), "run": count("run"),
            "correct": count("correct"),
            "geomean_omp_over_polypy": geomean([r.ratio for r in rows if r.ratio is not None and r.correct == "yes"]),
            "timed": sum(r.ratio is not None and r.correct == "yes" for r in rows),
            "slower_than_reference": [r.name for r in rows
                                      if r.ratio is not None and r.correct == "yes" and r.ratio < 1],
            "ports_checked": sum(r.port != "-" for r in rows), "ports_matching": sum(r.port == "yes" for r in rows),
            "geomean_port_over_polypy": geomean([r.port_ratio for r in ported]),
            "timed_against_port": len(ported),
            "slower_than_port": [r.name for r in ported if r.port_ratio < 1]}


def format_table(rows: Sequence[Row], *, timed: bool) -> str:
    head = ["program", "translate", "compile", "run", "correct", "reference"]
    serial = any(r.t_serial is not None for r in rows)
    ports = any(r.port != "-" for r in rows)
    if timed:
        head += ["t polypy (s)", "t serial (s)", "serial/polypy"] if serial else ["t polypy (s)", "t omp (s)", "omp/polypy"]
    if ports:
        head += ["omp port"] + (["t omp port (s)", "omp port/polypy"] if timed else [])
    head += ["first blocker"]
    body = []
    for r in rows:
        line = [r.name, r.translate, r.compile, r.run, r.correct, r.reference]
        if timed:
            digits = "{:.6f}" if serial else "{:.3f}"  # what PolyBench prints; 1 ms programs
            line += [_num(r.t_polypy, digits), _num(r.t_serial if serial else r.t_omp, digits), _num(r.ratio, "{:.2f}")]
        if ports:
            line += [r.port] + ([_num(r.t_port, "{:.6f}"), _num(r.port_ratio, "{:.2f}")] if timed else [])
        line += [r.blocker.replace("|", "\\|")]
        body.append(line)
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(line) + " |" for line in body]
    s = summary(rows)
    out.append("")
    out.append(f"{s['benchmarks']} benchmarks ({s['programs']} programs): translate {s['translate']}, "
               f"compile {s['compile']}, run {s['run']}, correct {s['correct']} "
               f"(a benchmark counts when all its programs do)")
    if timed:
        g = s["geomean_omp_over_polypy"]
        what = "t_serial / t_polypy (the times each program prints)" if serial else "t_omp / t_polypy"
        out.append(f"geomean {what} over {s['timed']} programs correct in both: "
                   + ("-" if g is None else f"{g:.2f}"))
        out.append("below 1: " + (", ".join(s["slower_than_reference"]) or "none"))
    if ports:
        out.append(f"OpenMP ports (bench/omp_polybench): {s['ports_matching']} of {s['ports_checked']} match the "
                   "translated program's output")
    if ports and timed:
        g = s["geomean_port_over_polypy"]
        out.append(f"geomean t_omp_port / t_polypy over {s['timed_against_port']} programs: "
                   + ("-" if g is None else f"{g:.2f}") + "; below 1: " + (", ".join(s["slower_than_port"]) or "none"))
    return "\n".join(out)


def _num(v: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if v is None else fmt.format(v)
