"""Check the baselines against the samples' references (standalone; not part of pytest).

    python bench/check.py [--only saxpy,...] [--variants omp,numpy] [--no-bench-sizes]

For every sample with a benchmark size: each baseline variant (by default the hand-written
OpenMP port and the NumPy port) on every test case of the sample, against the sample's own
``reference``, and at the benchmark sizes (full and quick) against the reference the harness
uses there. It also checks each scalable stand-in reference (``bench.references``) against the
sample's own reference on the test cases. Prints one line per check; exit status 1 if any fails.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.harness import SEED, bench_reference, bench_samples, fresh, mismatch  # noqa: E402
from bench.references import SCALABLE_REFERENCES  # noqa: E402
from bench.sizes import BENCH_SIZES  # noqa: E402
from bench.runner import Factory, Skip  # noqa: E402
from bench.variants import default_variants  # noqa: E402
from samples.spec import Case, Sample  # noqa: E402


def check_variant(sample: Sample, case: Case, factory: Factory, reference, seed: int) -> str | None:
    """None if the variant reproduces ``reference`` on fresh inputs for ``case``, else why not."""
    pristine = sample.make_args(np.random.default_rng(seed), case, np.float32)
    expected = reference(fresh(pristine), case)
    args = fresh(pristine)
    factory(sample, case)(args)
    return mismatch(sample, args, expected)


def check_reference(sample: Sample, case: Case, seed: int) -> str | None:
    """None if the scalable stand-in agrees with the sample's own reference on ``case``."""
    pristine = sample.make_args(np.random.default_rng(seed), case, np.float32)
    ours = SCALABLE_REFERENCES[sample.name](fresh(pristine), case)
    theirs = sample.reference(fresh(pristine), case)
    for name in sample.outputs:
        if not np.allclose(ours[name], theirs[name], rtol=1e-9, atol=1e-9):
            return f"{name}: max difference {float(np.max(np.abs(ours[name] - theirs[name]))):.3g}"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/check.py", description=__doc__.splitlines()[0])
    p.add_argument("--only", help="comma-separated kernels")
    p.add_argument("--variants", default="omp,numpy", help="comma-separated variants (default: omp,numpy)")
    p.add_argument("--no-bench-sizes", action="store_true", help="only the samples' test cases (fast)")
    opts = p.parse_args(argv)
    factories = default_variants()
    variants = opts.variants.split(",")
    unknown = [v for v in variants if v not in factories]
    if unknown:
        p.error(f"unknown variant {', '.join(unknown)} (have: {', '.join(factories)})")
    failures = 0

    def report(what: str, problem: str | None) -> None:
        nonlocal failures
        failures += problem is not None
        print(f"{what}: {'ok' if problem is None else 'MISMATCH: ' + problem}", flush=True)

    for sample in bench_samples(opts.only.split(",") if opts.only else None):
        if sample.name in SCALABLE_REFERENCES:
            for i, case in enumerate(sample.cases):
                report(f"{sample.name} {case} bench reference", check_reference(sample, case, 1234 + i))
        spec = BENCH_SIZES[sample.name]
        checks = [(f"test {case}", case, sample.reference, 1234 + i) for i, case in enumerate(sample.cases)]
        if not opts.no_bench_sizes:
            reference = bench_reference(sample)
            checks += [(f"bench {spec.quick}", spec.quick, reference, SEED),
                       (f"bench {spec.full}", spec.full, reference, SEED)]
        for variant in variants:
            for label, case, reference, seed in checks:
                what = f"{sample.name} {variant} {label}"
                try:
                    report(what, check_variant(sample, case, factories[variant], reference, seed))
                except Skip as e:
                    print(f"{what}: skip ({e})")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
