"""relu3: piecewise 0 / x^3 / 3x - 2, inputs kept away from the kinks at 0 and 1."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    x = rng.uniform(-1.0, 2.5, n)
    # Move values out of 0.05-wide bands around the kinks, keeping their side, so that finite
    # differences see a single branch.
    for kink in (0.0, 1.0):
        near = np.abs(x - kink) < 0.05
        x = np.where(near, x + np.where(x < kink, -0.05, 0.05), x)
    return {
        "x": np.ascontiguousarray(x, dtype=real),
        "y": np.zeros(n, dtype=real),
        "n": np.int32(n),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    x = args["x"].astype(np.float64)
    y = np.select([x <= 0.0, x < 1.0], [np.zeros_like(x), x ** 3], default=3.0 * x - 2.0)
    return {"y": y}


SAMPLE = Sample(
    name="relu3",
    kernel="relu3",
    cases=(
        Case(grid=(8,), block=(128,), sizes={"n": 1000}),    # partial last block
        Case(grid=(16,), block=(256,), sizes={"n": 4096}),   # exact
    ),
    make_args=make_args,
    reference=reference,
    outputs=("y",),
    rtol=1e-5,
    atol=1e-6,
    real=True,
    differentiable=True,
    wrt=("x",),
    description="branchy piecewise cubic ReLU per element",
    features=(),
)
