"""constant_coeffs: causal 8-tap FIR filter with taps in an initialized __constant__ array."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample

# Must match the initializer of `taps` in constant_coeffs.cu.
TAPS = np.array([0.02, 0.06, 0.14, 0.28, 0.28, 0.14, 0.06, 0.02])


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    return {
        "x": np.ascontiguousarray(rng.uniform(-1.0, 1.0, n), dtype=real),
        "y": np.zeros(n, dtype=real),
        "n": np.int32(n),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    x = args["x"].astype(np.float64)
    return {"y": np.convolve(x, TAPS)[: x.size]}


SAMPLE = Sample(
    name="constant_coeffs",
    kernel="constant_coeffs",
    cases=(
        Case(grid=(8,), block=(128,), sizes={"n": 1000}),   # partial last block
        Case(grid=(16,), block=(256,), sizes={"n": 4096}),  # exact
        Case(grid=(1,), block=(32,), sizes={"n": 5}),       # shorter than the filter
    ),
    make_args=make_args,
    reference=reference,
    outputs=("y",),
    rtol=1e-5,
    atol=1e-6,
    real=True,
    differentiable=True,
    wrt=("x",),
    description="FIR filter reading an initialized __constant__ coefficient array",
    features=("constant",),
)
