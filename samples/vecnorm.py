"""vecnorm: out = in / |in|, the magnitude recomputed per thread by a looping __device__ function."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    return {
        "in": np.ascontiguousarray(rng.uniform(-1.0, 1.0, n), dtype=real),
        "out": np.zeros(n, dtype=real),
        "n": np.int32(n),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    x = args["in"].astype(np.float64)
    return {"out": x / np.linalg.norm(x)}


SAMPLE = Sample(
    name="vecnorm",
    kernel="vecnorm",
    cases=(
        Case(grid=(4,), block=(256,), sizes={"n": 1000}),   # partial last block
        Case(grid=(8,), block=(64,), sizes={"n": 512}),     # exact
        Case(grid=(1,), block=(32,), sizes={"n": 7}),       # one block, mostly idle
    ),
    make_args=make_args,
    reference=reference,
    outputs=("out",),
    rtol=1e-4,
    atol=1e-6,
    real=True,
    differentiable=True,
    wrt=("in",),
    description="naive O(n^2) vector normalization via a looping __device__ mag()",
    features=("device-fn",),
)
