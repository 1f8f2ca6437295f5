"""layernorm: per-row normalization with gamma/beta, one block per row, two block reductions."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def _case(rows: int, cols: int, block: int) -> Case:
    return Case(grid=(rows,), block=(block,), sizes={"rows": rows, "cols": cols})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    rows, cols = case.sizes["rows"], case.sizes["cols"]
    x = rng.normal(0.0, 1.0, (rows, cols)) * rng.uniform(0.5, 3.0, (rows, 1)) + rng.uniform(-2.0, 2.0, (rows, 1))
    return {
        "x": np.ascontiguousarray(x.reshape(-1), dtype=real),  # rows x cols
        "gamma": np.ascontiguousarray(rng.uniform(0.5, 1.5, cols), dtype=real),
        "beta": np.ascontiguousarray(rng.uniform(-0.5, 0.5, cols), dtype=real),
        "y": np.zeros(rows * cols, dtype=real),
        "cols": np.int32(cols),
        "eps": real(1e-5),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    x = args["x"].astype(np.float64).reshape(-1, int(args["cols"]))
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + float(args["eps"])) * args["gamma"].astype(np.float64) + args["beta"].astype(np.float64)
    return {"y": y.reshape(-1)}


SAMPLE = Sample(
    name="layernorm",
    kernel="layernorm",
    cases=(
        _case(8, 100, 64),    # columns not a multiple of the block
        _case(16, 512, 128),  # 4 column passes
        _case(3, 20, 32),     # fewer columns than threads
    ),
    make_args=make_args,
    reference=reference,
    outputs=("y",),
    rtol=1e-4,
    atol=1e-5,
    real=True,
    differentiable=True,
    wrt=("x", "gamma", "beta"),
    description="layer normalization: block reductions in a __device__ helper with barriers",
    features=("shared", "barrier", "barrier-in-loop", "device-fn"),
)
