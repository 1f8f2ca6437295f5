"""stencil1d: 7-point 1-D stencil with a halo in dynamic shared memory."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample

RADIUS = 3


def _case(n: int, block: int) -> Case:
    # Dynamic shared memory: blockDim.x + 2*RADIUS elements. Sized for 8-byte elements so that the
    # same case also serves the REAL=double build (a float build simply uses half of it).
    return Case(grid=(-(-n // block),), block=(block,), sizes={"n": n}, shmem=(block + 2 * RADIUS) * 8)


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    return {
        "in": np.ascontiguousarray(rng.uniform(-1.0, 1.0, n), dtype=real),
        "w": np.ascontiguousarray(rng.uniform(-0.5, 0.5, 2 * RADIUS + 1), dtype=real),
        "out": np.zeros(n, dtype=real),
        "n": np.int32(n),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    x = args["in"].astype(np.float64)
    w = args["w"].astype(np.float64)
    n = x.size
    padded = np.concatenate([np.zeros(RADIUS), x, np.zeros(RADIUS)])
    out = np.zeros(n)
    for k in range(-RADIUS, RADIUS + 1):
        out += w[k + RADIUS] * padded[RADIUS + k: RADIUS + k + n]
    return {"out": out}


SAMPLE = Sample(
    name="stencil1d",
    kernel="stencil1d",
    cases=(
        _case(1000, 128),   # partial last block
        _case(4096, 256),   # exact multiple
        _case(37, 16),      # small blocks: halos cross many block boundaries
    ),
    make_args=make_args,
    reference=reference,
    outputs=("out",),
    rtol=1e-5,
    atol=1e-5,
    real=True,
    differentiable=True,
    wrt=("in", "w"),
    description="1-D stencil, halo staged in extern __shared__ memory sized at launch",
    features=("shared", "dynamic-shared", "barrier"),
)
