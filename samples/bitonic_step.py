"""bitonic_step: one in-place compare-exchange stage (j, k) of a bitonic sort."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.grid[0] * case.block[0]
    data = rng.uniform(-100.0, 100.0, n)
    data[5] = data[9]  # a tie
    return {
        "data": np.ascontiguousarray(data, dtype=np.float32),
        "j": np.int32(case.sizes["j"]),
        "k": np.int32(case.sizes["k"]),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    data = args["data"].astype(np.float64)
    j, k = int(args["j"]), int(args["k"])
    idx = np.arange(data.size)
    lo = idx[(idx ^ j) > idx]           # the lower element of each pair
    hi = lo ^ j
    ascending = (lo & k) == 0
    a, b = data[lo], data[hi]
    first = np.where(ascending, np.minimum(a, b), np.maximum(a, b))
    second = np.where(ascending, np.maximum(a, b), np.minimum(a, b))
    out = data.copy()
    out[lo], out[hi] = first, second
    return {"data": out}


SAMPLE = Sample(
    name="bitonic_step",
    kernel="bitonic_step",
    cases=(
        Case(grid=(8,), block=(128,), sizes={"j": 1, "k": 2}),       # first stage
        Case(grid=(8,), block=(128,), sizes={"j": 64, "k": 256}),    # pairs inside a block
        Case(grid=(16,), block=(64,), sizes={"j": 512, "k": 1024}),  # pairs across blocks, final merge
    ),
    make_args=make_args,
    reference=reference,
    outputs=("data",),
    rtol=0.0,
    atol=0.0,
    description="bitonic sort compare-exchange stage with XOR partner indexing",
    features=(),
)
