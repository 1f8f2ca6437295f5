"""softmax_rows: numerically stable row softmax, one block per row, shared max and sum reductions."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def _case(rows: int, cols: int, block: int) -> Case:
    return Case(grid=(rows,), block=(block,), sizes={"rows": rows, "cols": cols})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    rows, cols = case.sizes["rows"], case.sizes["cols"]
    x = rng.normal(0.0, 3.0, (rows, cols))
    x[0, :] += 40.0  # large values: overflow in float32 without the max shift
    return {
        "x": np.ascontiguousarray(x.reshape(-1), dtype=real),  # rows x cols
        "y": np.zeros(rows * cols, dtype=real),
        "cols": np.int32(cols),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    x = args["x"].astype(np.float64).reshape(-1, int(args["cols"]))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": (e / e.sum(axis=1, keepdims=True)).reshape(-1)}


SAMPLE = Sample(
    name="softmax_rows",
    kernel="softmax_rows",
    cases=(
        _case(8, 100, 64),    # cols not a multiple of the block: 2 column passes, idle threads
        _case(16, 300, 128),  # 3 column passes
        _case(5, 37, 64),     # fewer columns than threads
        _case(4, 256, 256),   # exact
    ),
    make_args=make_args,
    reference=reference,
    outputs=("y",),
    rtol=1e-4,
    atol=1e-6,
    real=True,
    differentiable=True,
    wrt=("x",),
    description="row softmax: block max and block sum reductions in shared memory",
    features=("shared", "barrier", "barrier-in-loop"),
)
