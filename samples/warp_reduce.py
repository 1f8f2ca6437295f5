"""warp_reduce: shuffle-based warp sums, shared per-warp partials, atomicAdd per block."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    return {
        "in": np.ascontiguousarray(rng.uniform(0.0, 1.0, n), dtype=real),
        "out": np.zeros(1, dtype=real),
        "n": np.int32(n),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    return {"out": args["out"].astype(np.float64) + np.sum(args["in"].astype(np.float64))}


SAMPLE = Sample(
    name="warp_reduce",
    kernel="warp_reduce",
    cases=(
        Case(grid=(20,), block=(256,), sizes={"n": 5000}),    # 8 warps per block, partial block
        Case(grid=(24,), block=(128,), sizes={"n": 3072}),    # exact
        Case(grid=(3,), block=(1024,), sizes={"n": 2500}),    # 32 warps: the final warp is full
        Case(grid=(5,), block=(32,), sizes={"n": 150}),       # one warp per block
    ),
    make_args=make_args,
    reference=reference,
    outputs=("out",),
    rtol=1e-4,
    atol=1e-4,
    real=True,
    differentiable=True,
    wrt=("in",),
    description="warp-shuffle reduction with per-warp partials in shared memory",
    features=("shared", "barrier", "warp", "atomics"),
)
