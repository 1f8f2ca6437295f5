"""heat_steps: per-thread forward-Euler time stepping with the number of steps a kernel argument."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def _case(n: int, steps: int, block: int) -> Case:
    return Case(grid=(-(-n // block),), block=(block,), sizes={"n": n, "steps": steps})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    return {
        "u0": rng.uniform(-1.0, 1.0, n).astype(real),
        "k": rng.uniform(0.5, 1.5, n).astype(real),
        "u": np.zeros(n, dtype=real),
        "n": np.int32(n),
        "steps": np.int32(case.sizes["steps"]),
        "dt": real(0.05),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    a = args["u0"].astype(np.float64)
    kk = args["k"].astype(np.float64)
    dt = float(args["dt"])
    b = np.zeros_like(a)
    for _ in range(int(args["steps"])):
        f = -kk * a + np.sin(b)
        b = b + dt * a
        a = a + dt * f
    return {"u": a + b}


SAMPLE = Sample(
    name="heat_steps",
    kernel="heat_steps",
    cases=(
        _case(64, 16, 32),
        _case(50, 0, 32),    # no step at all
        _case(37, 1, 16),    # one step, a partial block
        _case(100, 40, 64),
    ),
    make_args=make_args,
    reference=reference,
    outputs=("u",),
    rtol=1e-4,
    atol=1e-5,
    real=True,
    differentiable=True,
    wrt=("u0", "k"),
    description="explicit time stepping with a run-time number of steps",
    features=("runtime-loop",),
)
