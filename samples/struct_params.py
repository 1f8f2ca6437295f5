"""struct_params: clamp(alpha*x + beta, lo, hi) with the scalars in a by-value struct.

The struct argument ``p`` is given as a dict of its fields, in declaration order, each value
already of the field's C type (np.int32 / np.float32).
"""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    p = {
        "n": np.int32(n),
        "alpha": np.float32(2.5),
        "beta": np.float32(-0.25),
        "lo": np.float32(-1.0),
        "hi": np.float32(1.5),
    }
    return {
        "p": p,
        "x": np.ascontiguousarray(rng.uniform(-1.0, 1.0, n), dtype=np.float32),
        "y": np.zeros(n, dtype=np.float32),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    p = args["p"]
    x = args["x"].astype(np.float64)
    v = float(p["alpha"]) * x + float(p["beta"])
    return {"y": np.clip(v, float(p["lo"]), float(p["hi"]))}


SAMPLE = Sample(
    name="struct_params",
    kernel="struct_params",
    cases=(
        Case(grid=(8,), block=(128,), sizes={"n": 1000}),   # partial last block
        Case(grid=(4,), block=(256,), sizes={"n": 1024}),   # exact
    ),
    make_args=make_args,
    reference=reference,
    outputs=("y",),
    rtol=1e-6,
    atol=1e-6,
    description="kernel taking a struct by value and reading its fields",
    features=("struct",),
)
