"""prefix_scan: Hillis-Steele inclusive scan per block segment, plus per-segment totals."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def _case(n: int, block: int) -> Case:
    return Case(grid=(-(-n // block),), block=(block,), sizes={"n": n})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    return {
        "in": np.ascontiguousarray(rng.uniform(-1.0, 1.0, n), dtype=real),
        "out": np.zeros(n, dtype=real),
        "block_sums": np.zeros(case.grid[0], dtype=real),
        "n": np.int32(n),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    block = case.block[0]
    x = args["in"].astype(np.float64)
    nblocks = case.grid[0]
    padded = np.zeros(nblocks * block)
    padded[: x.size] = x
    scanned = np.cumsum(padded.reshape(nblocks, block), axis=1)
    return {"out": scanned.reshape(-1)[: x.size], "block_sums": scanned[:, -1]}


SAMPLE = Sample(
    name="prefix_scan",
    kernel="prefix_scan",
    cases=(
        _case(1000, 256),   # partial last segment
        _case(2048, 512),   # exact, largest block
        _case(100, 32),     # small segments
    ),
    make_args=make_args,
    reference=reference,
    outputs=("out", "block_sums"),
    rtol=1e-4,
    atol=1e-4,
    real=True,
    differentiable=True,
    wrt=("in",),
    description="block-level Hillis-Steele inclusive scan with two barriers per step",
    features=("shared", "barrier", "barrier-in-loop"),
)
