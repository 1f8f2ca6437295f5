"""device_fn_early_return: Collatz step counts through a __device__ function with early returns."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    start = rng.integers(2, 100000, n)
    start[:4] = [0, 1, 2, 27]  # both early returns at the top, a short one, a long one (111 steps)
    return {
        "start": np.ascontiguousarray(start, dtype=np.uint32),
        "steps": np.zeros(n, dtype=np.int32),
        "n": np.int32(n),
        "limit": np.int32(case.sizes["limit"]),
    }


def _collatz(x: int, limit: int) -> int:
    steps = 0
    while x > 1:
        if steps == limit:
            return -1
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    return steps


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    limit = int(args["limit"])
    return {"steps": np.array([_collatz(int(v), limit) for v in args["start"]], dtype=np.int32)}


SAMPLE = Sample(
    name="device_fn_early_return",
    kernel="device_fn_early_return",
    cases=(
        Case(grid=(8,), block=(128,), sizes={"n": 1000, "limit": 150}),   # some hit the limit
        Case(grid=(4,), block=(64,), sizes={"n": 256, "limit": 400}),     # none hit the limit
    ),
    make_args=make_args,
    reference=reference,
    outputs=("steps",),
    rtol=0.0,
    atol=0.0,
    description="__device__ function with early returns inside and before a while loop",
    features=("device-fn", "early-return", "while"),
)
