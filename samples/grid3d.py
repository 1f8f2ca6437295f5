"""grid3d: 3-D 7-point Laplacian on a 3-D grid of 3-D blocks."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def _case(nx: int, ny: int, nz: int, block: tuple[int, int, int]) -> Case:
    bx, by, bz = block
    grid = (-(-nx // bx), -(-ny // by), -(-nz // bz))
    return Case(grid=grid, block=block, sizes={"nx": nx, "ny": ny, "nz": nz})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    nx, ny, nz = case.sizes["nx"], case.sizes["ny"], case.sizes["nz"]
    return {
        "u": np.ascontiguousarray(rng.uniform(-1.0, 1.0, nz * ny * nx), dtype=real),  # x fastest
        "out": np.zeros(nz * ny * nx, dtype=real),
        "nx": np.int32(nx),
        "ny": np.int32(ny),
        "nz": np.int32(nz),
        "inv_h2": real(4.0),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    u = args["u"].astype(np.float64).reshape(int(args["nz"]), int(args["ny"]), int(args["nx"]))
    h = float(args["inv_h2"])
    out = u.copy()
    c = u[1:-1, 1:-1, 1:-1]
    nb = (u[1:-1, 1:-1, :-2] + u[1:-1, 1:-1, 2:] + u[1:-1, :-2, 1:-1] + u[1:-1, 2:, 1:-1]
          + u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1])
    out[1:-1, 1:-1, 1:-1] = h * (nb - 6.0 * c)
    return {"out": out.reshape(-1)}


SAMPLE = Sample(
    name="grid3d",
    kernel="grid3d",
    cases=(
        _case(16, 16, 8, (8, 8, 4)),     # exact
        _case(20, 18, 12, (8, 8, 4)),    # partial blocks in all three dimensions
        _case(9, 30, 5, (4, 16, 2)),     # other block shape
    ),
    make_args=make_args,
    reference=reference,
    outputs=("out",),
    rtol=1e-5,
    atol=1e-5,
    real=True,
    differentiable=True,
    wrt=("u",),
    description="7-point 3-D Laplacian with blockIdx.z / threadIdx.z",
    features=("3d",),
)
