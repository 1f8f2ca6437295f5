"""saxpy: y = a * x + y, guarded by ``if (i < n)``."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    return {
        "n": np.int32(n),
        "a": real(1.75),
        "x": np.ascontiguousarray(rng.uniform(-1.0, 1.0, n), dtype=real),
        "y": np.ascontiguousarray(rng.uniform(-1.0, 1.0, n), dtype=real),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    a = float(args["a"])
    x = args["x"].astype(np.float64)
    y = args["y"].astype(np.float64)
    return {"y": a * x + y}


SAMPLE = Sample(
    name="saxpy",
    kernel="saxpy",
    cases=(
        Case(grid=(4,), block=(256,), sizes={"n": 1000}),    # partial last block
        Case(grid=(16,), block=(256,), sizes={"n": 4096}),   # exact multiple
        Case(grid=(79,), block=(128,), sizes={"n": 10007}),  # prime size, other block shape
    ),
    make_args=make_args,
    reference=reference,
    outputs=("y",),
    rtol=1e-5,
    atol=1e-6,
    real=True,
    differentiable=True,
    wrt=("a", "x", "y"),
    description="y = a*x + y with a bounds guard",
    features=(),
)
