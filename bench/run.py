"""Command line: ``python -m bench [--only saxpy,matmul_tiled] [--quick | --small] [--threads N] ...``.

Sets the thread count for every runtime (``OMP_NUM_THREADS``, and the BLAS pools NumPy may use)
and the OpenMP wait policy *before* anything loads them, then runs the harness with a progress
line per kernel on stderr, prints the tables on stdout, writes the JSON (``--json PATH``, default
``bench/results/bench-<timestamp>.json``) and a plot next to it (``bench.plot``; ``--grad`` adds
the gradient overheads of ``bench.grad`` to both). This module imports nothing heavy at the top
for that reason.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
# Idle OpenMP workers sleep instead of spinning: the variants of a kernel run interleaved in one
# process, and workers spinning after one variant's launch would steal cores from the next one's
# (measured: up to 10x slower launches on 2 cores). Waking a sleeping worker costs microseconds.
# An OMP_WAIT_POLICY already in the environment is respected.
DEFAULT_WAIT_POLICY = "passive"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--only", "--kernels", dest="only",
                   help="comma-separated kernels (default: all with a benchmark size)")
    p.add_argument("--variants", help="comma-separated variants (default: all; omp is the yardstick)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="an eighth of the work and 3 timed runs")
    size.add_argument("--small", action="store_true",
                      help="each sample's largest test case, a small STREAM, 3 timed runs: seconds, a smoke run")
    p.add_argument("--threads", type=int, help="threads for every variant (default: all usable cores)")
    p.add_argument("--repeat", type=int, help="timed runs per variant, best counts (default 10, quick 3)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs after the correctness run")
    p.add_argument("--budget", type=float, default=2.0, help="stop repeating a variant after this many seconds")
    p.add_argument("--json", type=pathlib.Path, help="where to write the results (default: bench/results/)")
    p.add_argument("--plot", type=pathlib.Path, help="where to write the plot (default: the JSON's path, .png)")
    p.add_argument("--no-plot", action="store_true", help="write no plot")
    p.add_argument("--svg", action="store_true", help="also write the plot as SVG")
    p.add_argument("--grad", action="store_true",
                   help="also run bench.grad on the differentiable kernels among those chosen (their gradient "
                        "overheads go into the JSON and the plot)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--list", action="store_true", help="list kernels, sizes and variants, then exit")
    return p


def _set_threads(threads: int | None) -> None:
    if threads is None:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if "numpy" in sys.modules:
        print("warning: NumPy was imported before the thread count was set; its BLAS may use another count",
              file=sys.stderr)
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    os.environ.setdefault("OMP_WAIT_POLICY", DEFAULT_WAIT_POLICY)


def main(argv: list[str] | None = None) -> int:
    opts = _parser().parse_args(argv)
    if opts.threads is not None and opts.threads < 1:
        print("error: --threads must be at least 1", file=sys.stderr)
        return 2
    _set_threads(opts.threads)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # for `samples` and `bench` when run as bench/run.py

    from bench.harness import TimingOptions, bench_samples, run_benchmarks
    from bench.progress import Progress
    from bench.report import format_report, write_json
    from bench.sizes import BENCH_SIZES
    from bench.variants import default_variants

    variants = default_variants()
    if opts.variants:
        names = opts.variants.split(",")
        unknown = [v for v in names if v not in variants]
        if unknown:
            print(f"error: unknown variant {', '.join(unknown)} (have: {', '.join(variants)})", file=sys.stderr)
            return 2
        variants = {v: variants[v] for v in names}
    try:
        samples = bench_samples(opts.only.split(",") if opts.only else None)
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    if opts.list:
        for s in samples:
            spec = BENCH_SIZES[s.name]
            print(f"{s.name:<22} full {spec.full}   quick {spec.quick}")
        print("variants:", ", ".join(variants))
        return 0

    size = "small" if opts.small else "quick" if opts.quick else "full"
    repeat = opts.repeat if opts.repeat is not None else (10 if size == "full" else 3)
    options = TimingOptions(repeat=repeat, warmup=opts.warmup, budget_s=opts.budget)
    grad_samples = [s for s in samples if s.differentiable] if opts.grad else []
    progress = Progress(len(samples) + len(grad_samples), enabled=not opts.quiet)
    report = run_benchmarks(samples, variants, size=size, options=options, progress=progress)
    extra = {}
    grad_table = ""
    if grad_samples:
        from bench import grad

        rows = grad.run_grad(grad_samples, repeat=min(repeat, 5), variants=grad.VARIANTS, small=size == "small",
                             progress=progress)
        extra["grad"] = grad.to_json(rows, grad.VARIANTS, size="small" if size == "small" else "quick")
        grad_table = "\n\nGradient overheads (python -m bench.grad)\n" + grad.format_table(rows, grad.VARIANTS)
    print(format_report(report) + grad_table)
    path = write_json(report, opts.json, extra=extra)
    print(f"\nresults written to {path}")
    if not opts.no_plot:
        plot(path, opts.plot, svg=opts.svg)
    return 0


def plot(json_path: pathlib.Path, out: pathlib.Path | None, *, svg: bool) -> None:
    """Draw the saved results; without matplotlib say so (the JSON is written already)."""
    from bench.plot import PlotUnavailable, plot_files

    try:
        written = plot_files([json_path], out, svg=svg)
    except PlotUnavailable as e:
        print(f"note: {e}", file=sys.stderr)
        return
    for p in written:
        print(f"plot written to {p}")


if __name__ == "__main__":
    raise SystemExit(main())
