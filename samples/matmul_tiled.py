"""matmul_tiled: C = A @ B through two 16x16 shared tiles, with bounds guards."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample

TILE = 16


def _case(m: int, n: int, k: int) -> Case:
    return Case(grid=(-(-n // TILE), -(-m // TILE)), block=(TILE, TILE), sizes={"M": m, "N": n, "K": k})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    m, n, k = case.sizes["M"], case.sizes["N"], case.sizes["K"]
    return {
        "A": np.ascontiguousarray(rng.uniform(-1.0, 1.0, m * k), dtype=real),  # row-major m x k
        "B": np.ascontiguousarray(rng.uniform(-1.0, 1.0, k * n), dtype=real),  # row-major k x n
        "C": np.zeros(m * n, dtype=real),
        "M": np.int32(m),
        "N": np.int32(n),
        "K": np.int32(k),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    m, n, k = int(args["M"]), int(args["N"]), int(args["K"])
    a = args["A"].astype(np.float64).reshape(m, k)
    b = args["B"].astype(np.float64).reshape(k, n)
    return {"C": (a @ b).reshape(-1)}


SAMPLE = Sample(
    name="matmul_tiled",
    kernel="matmul_tiled",
    cases=(
        _case(64, 64, 64),   # exact multiples of the tile
        _case(70, 50, 90),   # partial tiles in every dimension
        _case(96, 33, 17),   # tall, K barely over one tile
    ),
    make_args=make_args,
    reference=reference,
    outputs=("C",),
    rtol=1e-4,
    atol=1e-4,
    real=True,
    differentiable=True,
    wrt=("A", "B"),
    description="tiled matrix multiply with two shared tiles and barriers in the k-tile loop",
    features=("shared", "barrier", "barrier-in-loop"),
)
