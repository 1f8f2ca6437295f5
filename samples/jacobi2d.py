"""jacobi2d: one out-of-place 5-point Jacobi sweep, boundary copied."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def _case(nx: int, ny: int, bx: int, by: int) -> Case:
    return Case(grid=(-(-nx // bx), -(-ny // by)), block=(bx, by), sizes={"nx": nx, "ny": ny})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    nx, ny = case.sizes["nx"], case.sizes["ny"]
    return {
        "in": np.ascontiguousarray(rng.uniform(-1.0, 1.0, ny * nx), dtype=real),  # ny rows of nx
        "out": np.zeros(ny * nx, dtype=real),
        "nx": np.int32(nx),
        "ny": np.int32(ny),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    u = args["in"].astype(np.float64).reshape(int(args["ny"]), int(args["nx"]))
    out = u.copy()
    out[1:-1, 1:-1] = 0.25 * (u[1:-1, :-2] + u[1:-1, 2:] + u[:-2, 1:-1] + u[2:, 1:-1])
    return {"out": out.reshape(-1)}


SAMPLE = Sample(
    name="jacobi2d",
    kernel="jacobi2d",
    cases=(
        _case(64, 64, 16, 16),   # exact
        _case(50, 37, 16, 8),    # partial blocks in x and y
        _case(3, 100, 4, 32),    # a single interior column
    ),
    make_args=make_args,
    reference=reference,
    outputs=("out",),
    rtol=1e-5,
    atol=1e-6,
    real=True,
    differentiable=True,
    wrt=("in",),
    description="5-point Jacobi sweep on a 2-D grid with guards and an early return",
    features=("early-return",),
)
