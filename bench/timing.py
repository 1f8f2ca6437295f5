"""Best-of-N timing (wall clock, or the process's CPU time), interleaved across the variants of one kernel."""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable, Mapping

from bench.runner import Runner


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds per run: every timed run, and the best (the figure the report uses)."""

    runs: tuple[float, ...]

    @property
    def best(self) -> float:
        return min(self.runs)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)


def time_interleaved(runners: Mapping[str, tuple[Runner, dict[str, Any]]], *, repeat: int, warmup: int,
                     budget_s: float, clock: Callable[[], float] = time.perf_counter) -> dict[str, Timing | Exception]:
    """Time several variants of one kernel: ``warmup`` untimed runs each, then up to ``repeat``
    rounds in which every variant runs once.

    Round-robin rather than one variant after the other, so that a change in machine load
    during the measurement (a shared machine) falls on all variants alike. A variant drops out
    once its timed runs add up to ``budget_s`` (after at least one), so that a slow baseline
    (NumPy n-body) does not hold up the rest. Each variant keeps its own ``args``: kernels that
    update in place (saxpy's y, histogram's bins) keep accumulating, which costs the same work
    each time. A variant that raises is reported with its exception and timed no further.
    ``clock``: ``time.perf_counter`` (wall clock) by default; ``time.process_time`` counts the
    CPU time of every thread of this process instead, which a loaded machine disturbs far less
    (with one worker thread it is the run's own time).
    """
    results: dict[str, Timing | Exception] = {}
    runs: dict[str, list[float]] = {name: [] for name in runners}
    for name, (run, args) in runners.items():
        try:
            for _ in range(warmup):
                run(args)
        except Exception as e:
            results[name] = e
    for _ in range(max(repeat, 1)):
        active = [name for name in runners
                  if name not in results and (not runs[name] or sum(runs[name]) < budget_s)]
        if not active:
            break
        for name in active:
            run, args = runners[name]
            try:
                t0 = clock()
                run(args)
                runs[name].append(clock() - t0)
            except Exception as e:
                results[name] = e
    for name in runners:
        results.setdefault(name, Timing(tuple(runs[name])))
    return results
