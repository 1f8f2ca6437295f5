"""Variants: the plug-in point for everything the harness times.

A *variant* is a factory ``make(sample, case) -> run``; ``run(args)`` performs one launch of the
sample's kernel on ``args`` (the dict from ``sample.make_args``, arrays updated in place) and
returns nothing. The factory does the one-time work (compiling, loading, binding) and is never
timed; the harness checks ``run``'s result against the sample's reference, then times ``run``.

A factory that cannot run a sample raises ``Skip(reason)`` (``bench.runner``, with ``Runner``,
``Factory`` and ``threads``); the harness reports the reason and
goes on. Threads: every variant must use ``threads()`` threads; the harness exports it as
``OMP_NUM_THREADS`` before any runtime is loaded, so OpenMP code follows it without being told,
and a variant with its own thread pool sizes the pool from ``threads()``.

``default_variants()`` is the table ``python -m bench`` runs; a script can pass its own mapping
(for instance ``{**default_variants(), "mine": make_mine}``) to ``bench.harness.run_benchmarks``.
"""
from __future__ import annotations

from bench.runner import Factory

# Ratios in the report are t_omp / t_variant: the hand-written OpenMP port is the yardstick.
BASELINE = "omp"


def default_variants() -> dict[str, Factory]:
    """omp, numpy, polypy-llvm, polypy-fine, polypy-c, polypy-noopt, in the order the table prints them."""
    from bench.numpy_ports import make_numpy_variant
    from bench.omp_ports import make_omp_variant
    from bench.polypy_variants import (make_polypy_c_variant, make_polypy_fine_variant, make_polypy_llvm_variant,
                                       make_polypy_noopt_variant)

    return {
        BASELINE: make_omp_variant,
        "numpy": make_numpy_variant,
        "polypy-llvm": make_polypy_llvm_variant,
        "polypy-fine": make_polypy_fine_variant,
        "polypy-c": make_polypy_c_variant,
        "polypy-noopt": make_polypy_noopt_variant,
    }
