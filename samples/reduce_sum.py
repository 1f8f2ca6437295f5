"""reduce_sum: shared-memory tree reduction per block, then atomicAdd into *out."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    return {
        # positive values: the sum does not cancel, so a relative tolerance is meaningful
        "in": np.ascontiguousarray(rng.uniform(0.0, 1.0, n), dtype=real),
        "out": np.zeros(1, dtype=real),
        "n": np.int32(n),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    return {"out": args["out"].astype(np.float64) + np.sum(args["in"].astype(np.float64))}


SAMPLE = Sample(
    name="reduce_sum",
    kernel="reduce_sum",
    cases=(
        Case(grid=(40,), block=(256,), sizes={"n": 10000}),   # partial last block
        Case(grid=(64,), block=(128,), sizes={"n": 8192}),    # exact, smaller block
        Case(grid=(3,), block=(32,), sizes={"n": 70}),        # tiny, partial block
    ),
    make_args=make_args,
    reference=reference,
    outputs=("out",),
    rtol=1e-4,
    atol=1e-4,
    real=True,
    differentiable=True,
    wrt=("in",),
    description="block tree reduction in shared memory, atomicAdd of block sums",
    features=("shared", "barrier", "barrier-in-loop", "atomics"),
)
