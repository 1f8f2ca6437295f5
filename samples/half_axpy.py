"""half_axpy: y = a * x + y on __half (binary16): the product and the sum each rounded to nearest
even, as NumPy's float16 arithmetic rounds them, so the reference is bit-exact (rtol = atol = 0)."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    x = rng.uniform(-4.0, 4.0, n).astype(np.float16)
    y = rng.uniform(-4.0, 4.0, n).astype(np.float16)
    x[:4] = np.float16([6.1e-5, -6.0e-8, 65504.0, np.inf])[: min(4, n)]  # subnormal, overflow, inf
    return {"n": np.int32(n), "a": np.float16(1.75), "x": x, "y": y}


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    with np.errstate(over="ignore", invalid="ignore"):
        return {"y": np.float16(args["a"]) * args["x"] + args["y"]}


SAMPLE = Sample(
    name="half_axpy",
    kernel="half_axpy",
    cases=(
        Case(grid=(4,), block=(256,), sizes={"n": 1000}),
        Case(grid=(79,), block=(128,), sizes={"n": 10007}),
    ),
    make_args=make_args,
    reference=reference,
    outputs=("y",),
    rtol=0.0,
    atol=0.0,
    description="y = a*x + y in half precision (cuda_fp16.h), rounded at each operation",
    features=("half",),
)
