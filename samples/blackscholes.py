"""blackscholes: European call/put prices with erfc-based normal CDF."""
from __future__ import annotations

import math

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    return {
        "S": np.ascontiguousarray(rng.uniform(5.0, 30.0, n), dtype=real),
        "X": np.ascontiguousarray(rng.uniform(1.0, 100.0, n), dtype=real),
        "T": np.ascontiguousarray(rng.uniform(0.25, 10.0, n), dtype=real),
        "call": np.zeros(n, dtype=real),
        "put": np.zeros(n, dtype=real),
        "R": real(0.02),
        "V": real(0.30),
        "n": np.int32(n),
    }


def _normal_cdf(d: np.ndarray) -> np.ndarray:
    return 0.5 * np.vectorize(math.erfc)(-d / math.sqrt(2.0))


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    s, x, t = (args[k].astype(np.float64) for k in ("S", "X", "T"))
    r, v = float(args["R"]), float(args["V"])
    d1 = (np.log(s / x) + (r + 0.5 * v * v) * t) / (v * np.sqrt(t))
    d2 = d1 - v * np.sqrt(t)
    disc = x * np.exp(-r * t)
    return {
        "call": s * _normal_cdf(d1) - disc * _normal_cdf(d2),
        "put": disc * _normal_cdf(-d2) - s * _normal_cdf(-d1),
    }


SAMPLE = Sample(
    name="blackscholes",
    kernel="blackscholes",
    cases=(
        Case(grid=(8,), block=(128,), sizes={"n": 1000}),   # partial last block
        Case(grid=(16,), block=(256,), sizes={"n": 4096}),  # exact
    ),
    make_args=make_args,
    reference=reference,
    outputs=("call", "put"),
    rtol=1e-4,
    atol=2e-4,
    real=True,
    differentiable=True,
    wrt=("S", "X", "T", "R", "V"),
    description="Black-Scholes call/put pricing: log, sqrt, exp, erfc, active scalars",
    features=("device-fn",),
)
