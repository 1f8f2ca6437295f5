"""Gradient benchmark: the cost of ``K_grad`` relative to the kernel ``K`` on the CPU.

For every differentiable sample, in float32 through the LLVM JIT (``polypy.compile`` +
``polypy.grad``), side by side in one run:

* ``fwd``: the kernel itself (the denominator of every ratio);
* ``grad``: the reverse-mode gradient with every optimization (the default);
* one column per optimization switched off: ``no-opt`` (differentiate the kernel as written,
  no barrier elimination / forwarding / invariant hoisting first), ``store`` and ``recompute``
  (one caching strategy for every value instead of the choice per value), ``no-privacy``
  (atomics for every adjoint write isl would have proved private), ``no-blockred`` (atomics
  instead of block-level reductions), ``no-windows`` (atomics instead of block windows: a
  block's contributions to a read-only input summed in shared memory, then flushed);
* ``fd``: what central finite differences would cost for the same full gradient, 2 forward
  launches per active input element (computed, not timed: it is millions of launches).

Every gradient variant is first checked against the default one (same seeds, same inputs); a
variant that disagrees is reported WRONG and not timed, one the AD engine refuses is reported
with its reason. Enzyme reports 2-20x gradient overheads on GPUs, ADBench's hand-written
gradients 2-7x.

    python -m bench.grad [--small] [--only saxpy,matmul_tiled] [--repeat N] [--variants no-windows,store]
                         [--json PATH] [--quiet]

The table goes to stdout, progress to stderr, and a JSON document (``bench.jsonfile``, kind
``grad``: per kernel the forward time, per variant its status, time and t_variant / t_fwd) to
``--json PATH`` or ``bench/results/grad-<timestamp>.json``; ``python -m bench.plot`` draws it.
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import polypy  # noqa: E402
from bench.jsonfile import write_results  # noqa: E402
from bench.progress import Progress  # noqa: E402
from bench.sizes import BENCH_SIZES  # noqa: E402
from bench.timing import Timing, time_interleaved  # noqa: E402
from samples.spec import Case, Sample, all_samples  # noqa: E402

VARIANTS: dict[str, dict[str, Any]] = {
    "grad": {},
    "no-opt": {"optimize": False},
    "store": {"cache": "store"},
    "recompute": {"cache": "recompute"},
    "no-privacy": {"privacy": False},
    "no-blockred": {"block_reductions": False},
    "no-windows": {"windows": False},
}


def bench_case(sample: Sample, *, quick: bool, small: bool = False) -> Case:
    """The launch to time: the benchmark's quick size when the sample has one (gradients are
    heavier than kernels), otherwise -- or with ``small`` -- its largest test case."""
    spec = BENCH_SIZES.get(sample.name)
    if spec is not None and not small:
        return spec.quick
    return max(sample.cases, key=lambda c: math.prod(c.grid) * math.prod(c.block))


def shadow_arguments(gradient, args: dict[str, Any], outputs: tuple[str, ...], seed: int) -> dict[str, Any]:
    """The gradient's arguments: the primal ones, seeds for outputs' shadows, zeros elsewhere."""
    rng = np.random.default_rng(seed)
    full: dict[str, Any] = {}
    for p in gradient.gpu.params:
        if p.name in args:
            value = args[p.name]
            full[p.name] = value.copy() if isinstance(value, np.ndarray) else value
            continue
        primal = args.get(p.name[2:])
        if isinstance(primal, np.ndarray):
            shadow = rng.standard_normal(primal.shape) if p.name[2:] in outputs else np.zeros(primal.shape)
            full[p.name] = shadow.astype(primal.dtype)
        else:  # an active scalar: one accumulated element
            dtype = np.asarray(primal).dtype if primal is not None else np.float32
            full[p.name] = np.zeros(1, dtype=dtype)
    return full


def active_inputs(sample: Sample, args: dict[str, Any]) -> int:
    """Number of scalar inputs the full gradient is taken with respect to."""
    total = 0
    for name in sample.wrt:
        value = args[name]
        total += value.size if isinstance(value, np.ndarray) else 1
    return total


def bench_sample(sample: Sample, *, quick: bool, repeat: int, variants: dict[str, dict[str, Any]] | None = None,
                 small: bool = False, progress: Progress | None = None) -> dict[str, Any]:
    """One sample: the row of the table -- ``fwd_ms``, per variant t_variant / t_fwd or why it
    was not timed, ``fd`` -- plus ``best_s`` (every timed best, in seconds)."""
    variants = VARIANTS if variants is None else variants
    progress = progress if progress is not None else Progress(1, enabled=False)
    case = bench_case(sample, quick=quick, small=small)
    defines = {**sample.defines, "REAL": "float"}
    mod = polypy.compile(sample.source, defines=defines)
    kernel = getattr(mod, sample.kernel)
    args = sample.make_args(np.random.default_rng(0), case, np.float32)
    config = (case.grid, case.block, case.shmem)
    row: dict[str, Any] = {"kernel": sample.name, "case": str(case), "inputs": active_inputs(sample, args)}
    runners: dict[str, Any] = {"fwd": (lambda a: kernel[config](**a), {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                                                      for k, v in args.items()})}
    reference: dict[str, np.ndarray] | None = None
    problems: dict[str, str] = {}
    for name, options in variants.items():
        progress.note(f"{name} ...")
        try:
            gradient = polypy.grad(kernel, wrt=list(sample.wrt), **options)
        except polypy.UserError as exc:
            problems[name] = f"refused: {exc.message}"
            progress.note("refused,")
            continue
        full = shadow_arguments(gradient, args, sample.outputs, seed=1)
        check = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in full.items()}
        gradient[config](**check)
        shadows = {k: v for k, v in check.items() if k.startswith("d_")}
        if reference is None:
            reference = shadows
        else:
            for k, v in shadows.items():
                scale = max(float(np.max(np.abs(reference[k]))), 1e-20)
                if not np.allclose(v, reference[k], rtol=1e-3, atol=1e-4 * scale):
                    problems[name] = f"WRONG ({k} differs from the default gradient)"
                    break
        if name not in problems:
            runners[name] = (lambda a, g=gradient: g[config](**a), full)
        progress.note("WRONG," if name in problems else "ok,")
    progress.note(f"timing {len(runners)} ...")
    timings = time_interleaved(runners, repeat=repeat, warmup=1, budget_s=3.0)
    fwd = timings.get("fwd")
    if not isinstance(fwd, Timing):
        row["error"] = f"forward kernel failed: {fwd}"
        return row
    row["fwd_ms"] = fwd.best * 1e3
    row["best_s"] = {name: t.best for name, t in timings.items() if isinstance(t, Timing)}
    for name in variants:
        t = timings.get(name)
        if isinstance(t, Timing):
            row[name] = t.best / fwd.best
        elif name in problems:
            row[name] = problems[name]
        elif isinstance(t, Exception):
            row[name] = f"failed: {t}"
    row["fd"] = 2.0 * row["inputs"]
    return row


def format_table(rows: list[dict[str, Any]], variants: dict[str, dict[str, Any]] | None = None) -> str:
    variants = VARIANTS if variants is None else variants
    columns = ["fwd_ms"] + list(variants) + ["fd"]
    header = ["kernel", "case"] + columns
    lines = []
    body = []
    for r in rows:
        cells = [r["kernel"], r["case"]]
        for c in columns:
            v = r.get(c)
            if isinstance(v, float):
                cells.append(f"{v:.2f}" if c == "fwd_ms" else (f"{v:.3g}x" if c != "fd" else f"{v:.3g}x"))
            elif v is None:
                cells.append("-")
            else:
                cells.append(str(v).split(":")[0])
        body.append(cells)
    ratios = {c: [r[c] for r in rows if isinstance(r.get(c), float)] for c in variants}
    geo = ["geomean", ""] + [""] + [f"{math.exp(sum(map(math.log, v)) / len(v)):.3g}x" if v else "-"
                                   for v in ratios.values()] + [""]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body, geo)]
    for cells in [header, ["-" * w for w in widths], *body, geo]:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(cells, widths)))
    notes = [f"{r['kernel']} {c}: {r[c]}" for r in rows for c in variants
             if isinstance(r.get(c), str)] + [f"{r['kernel']}: {r['error']}" for r in rows if "error" in r]
    text = "t_variant / t_fwd (lower is better); fd = 2 forward launches per active input\n" + "\n".join(lines)
    if notes:
        text += "\n\nnot timed:\n" + "\n".join("  " + x for x in notes)
    return text


def _status(value: Any) -> str:
    if isinstance(value, float):
        return "ok"
    text = str(value)
    return "refused" if text.startswith("refused") else "wrong" if text.startswith("WRONG") else "error"


def to_json(rows: list[dict[str, Any]], variants: dict[str, dict[str, Any]], *, size: str) -> dict[str, Any]:
    """The rows as a JSON document of kind ``grad``: per kernel the forward time and, per
    variant, its status, best time and ``ratio_vs_fwd`` = t_variant / t_fwd."""
    from bench.harness import machine_info
    from bench.report import geomean

    kernels = []
    for r in rows:
        best = r.get("best_s", {})
        entry: dict[str, Any] = {"kernel": r["kernel"], "case": r["case"], "inputs": r["inputs"],
                                 "fwd_s": best.get("fwd"), "fd_ratio": r.get("fd"), "variants": {}}
        if "error" in r:
            entry["error"] = r["error"]
        for name in variants:
            if name not in r:
                continue
            value = r[name]
            status = _status(value)
            entry["variants"][name] = {"status": status, "ratio_vs_fwd": value if status == "ok" else None,
                                       "best_s": best.get(name), "message": "" if status == "ok" else str(value)}
        kernels.append(entry)
    return {
        "kind": "grad",
        "size": size,
        "machine": machine_info(),
        "variants": list(variants),
        "geomean_ratio_vs_fwd": {name: geomean([r[name] for r in rows if isinstance(r.get(name), float)])
                                 for name in variants},
        "kernels": kernels,
    }


def run_grad(samples: list[Sample], *, repeat: int, variants: dict[str, dict[str, Any]], small: bool,
             progress: Progress) -> list[dict[str, Any]]:
    """Every sample's row, one progress step each."""
    rows = []
    for s in samples:
        progress.start(f"{s.name} (gradient)")
        row = bench_sample(s, quick=True, repeat=repeat, variants=variants, small=small, progress=progress)
        progress.end("failed" if "error" in row else "done")
        rows.append(row)
    return rows


def differentiable_samples(only: set[str]) -> list[Sample]:
    """The differentiable samples (those named in ``only``, when it is not empty)."""
    samples = [s for s in all_samples() if s.differentiable]
    unknown = only - {s.name for s in samples}
    if unknown:
        raise KeyError(f"no differentiable sample {', '.join(sorted(unknown))}")
    return [s for s in samples if not only or s.name in only]


# Loops with a run-time trip count (``samples/heat_steps.cu``, ``steps`` a kernel argument): the
# gradient with the carried registers taped (a tape sized at launch), recomputed from the loop
# entry (the default: quadratic), and checkpointed with a few snapshot budgets (revolve).
STEPS_VARIANTS: dict[str, dict[str, Any]] = {
    "taped": {"runtime_tapes": True},
    "replay": {},
    "revolve-2": {"checkpoint_budget": 2},
    "revolve-4": {"checkpoint_budget": 4},
    "revolve-8": {"checkpoint_budget": 8},
}


def bench_runtime_steps(steps_list: tuple[int, ...] = (16, 128), *, n: int = 4096, repeat: int = 3,
                        progress: Progress | None = None) -> list[dict[str, Any]]:
    """heat_steps at each number of steps: per variant t_variant / t_fwd and the per-thread
    memory the gradient's tapes and snapshots take (elements, ``polypy.grad(...).memory``)."""
    from samples.spec import sample

    progress = progress if progress is not None else Progress(1, enabled=False)
    s = sample("heat_steps")
    mod = polypy.compile(s.source, defines={"REAL": "float"})
    kernel = mod.heat_steps
    gradients = {name: polypy.grad(kernel, wrt=list(s.wrt), **options) for name, options in STEPS_VARIANTS.items()}
    rows = []
    for steps in steps_list:
        progress.note(f"steps={steps} ...")
        case = Case(grid=(-(-n // 128),), block=(128,), sizes={"n": n, "steps": steps})
        args = s.make_args(np.random.default_rng(0), case, np.float32)
        config = (case.grid, case.block)
        runners: dict[str, Any] = {"fwd": (lambda a: kernel[config](**a), dict(args))}
        row: dict[str, Any] = {"kernel": "heat_steps", "steps": steps, "n": n, "memory": {}}
        reference = None
        for name, g in gradients.items():
            full = shadow_arguments(g, args, s.outputs, seed=1)
            check = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in full.items()}
            g[config](**check)
            got = np.concatenate([check["d_u0"], check["d_k"]])
            if reference is None:
                reference = got
            elif not np.array_equal(got, reference):
                row[name] = "WRONG (differs from the taped gradient)"
                continue
            row["memory"][name] = g.memory(config, **full)
            runners[name] = (lambda a, g=g: g[config](**a), full)
        timings = time_interleaved(runners, repeat=repeat, warmup=1, budget_s=3.0)
        fwd = timings["fwd"]
        row["fwd_ms"] = fwd.best * 1e3 if isinstance(fwd, Timing) else None
        for name in gradients:
            t = timings.get(name)
            if isinstance(t, Timing) and isinstance(fwd, Timing):
                row[name] = t.best / fwd.best
        rows.append(row)
    return rows


def format_steps_table(rows: list[dict[str, Any]]) -> str:
    """One line per (steps, variant): t/t_fwd and tape / checkpoint elements per thread."""
    lines = ["heat_steps (run-time steps): t_grad / t_fwd, tape and checkpoint elements per thread",
             f"{'steps':>6}  {'variant':<10}  {'t/t_fwd':>9}  {'tape':>6}  {'snapshots':>9}"]
    for r in rows:
        for name in STEPS_VARIANTS:
            v = r.get(name)
            mem = r["memory"].get(name, {})
            ratio = f"{v:.3g}x" if isinstance(v, float) else str(v)
            lines.append(f"{r['steps']:>6}  {name:<10}  {ratio:>9}  {mem.get('tape', '-'):>6}  "
                         f"{mem.get('checkpoint', '-'):>9}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.grad", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="(kept for symmetry; gradients always use quick sizes)")
    parser.add_argument("--small", action="store_true", help="each sample's largest test case: seconds, a smoke run")
    parser.add_argument("--only", "--kernels", dest="only", default="", help="comma-separated sample names")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--variants", default="", help="comma-separated columns (default: all; grad is always run)")
    parser.add_argument("--json", type=pathlib.Path, help="where to write the results (default: bench/results/)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--runtime-steps", default="", metavar="S1,S2",
                        help="only the run-time trip count table (heat_steps: taped vs revolve) at these steps")
    args = parser.parse_args(argv)
    if args.runtime_steps:
        steps = tuple(int(x) for x in args.runtime_steps.split(",") if x)
        rows = bench_runtime_steps(steps, n=1024 if args.small else 4096, repeat=args.repeat,
                                   progress=Progress(1, enabled=not args.quiet))
        print(format_steps_table(rows))
        if args.json is not None:
            from bench.harness import machine_info

            doc = {"kind": "grad-steps", "machine": machine_info(), "variants": list(STEPS_VARIANTS), "rows": rows}
            print(f"\nresults written to {write_results(doc, args.json, prefix='grad-steps')}")
        return 0
    only = {x for x in args.only.split(",") if x}
    chosen = [x for x in args.variants.split(",") if x]
    unknown = [x for x in chosen if x not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    variants = {k: v for k, v in VARIANTS.items() if not chosen or k == "grad" or k in chosen}
    try:
        samples = differentiable_samples(only)
    except KeyError as e:
        parser.error(e.args[0])
    progress = Progress(len(samples), enabled=not args.quiet)
    rows = run_grad(samples, repeat=args.repeat, variants=variants, small=args.small, progress=progress)
    print(format_table(rows, variants))
    size = "small" if args.small else "quick"
    path = write_results(to_json(rows, variants, size=size), args.json, prefix="grad",
                         suffix="-small" if args.small else "")
    print(f"\nresults written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
