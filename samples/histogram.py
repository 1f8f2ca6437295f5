"""histogram: 256-bin byte histogram, shared-memory atomics merged into global bins."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample

NBINS = 256


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    # A skewed distribution (many collisions on a few bins) plus uniform noise; a few bins stay 0.
    skewed = np.clip(rng.normal(100.0, 6.0, n), 0, NBINS - 1)
    uniform = rng.integers(0, 200, n)
    data = np.where(rng.random(n) < 0.6, skewed, uniform).astype(np.uint8)
    bins = np.zeros(NBINS, dtype=np.uint32)
    bins[7] = 5  # the kernel adds to whatever is there
    return {"data": np.ascontiguousarray(data), "bins": bins, "n": np.int32(n)}


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    counts = np.bincount(args["data"], minlength=NBINS)
    return {"bins": (args["bins"].astype(np.int64) + counts).astype(np.uint32)}


SAMPLE = Sample(
    name="histogram",
    kernel="histogram",
    cases=(
        Case(grid=(8,), block=(128,), sizes={"n": 10000}),    # ~10 grid-stride iterations, block < NBINS
        Case(grid=(16,), block=(256,), sizes={"n": 50001}),   # ragged tail
        Case(grid=(5,), block=(512,), sizes={"n": 777}),      # block > NBINS, many idle threads
    ),
    make_args=make_args,
    reference=reference,
    outputs=("bins",),
    rtol=0.0,
    atol=0.0,
    description="per-block shared histogram with shared atomics, merged with global atomics",
    features=("shared", "barrier", "atomics", "shared-atomics"),
)
