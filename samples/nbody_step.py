"""nbody_step: all-pairs gravity on float4 bodies, tiles of bodies staged in shared memory.

A float4 array of n elements is passed as a flat float32 array of 4n numbers (x, y, z, w, x, ...).
"""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def _case(n: int, block: int) -> Case:
    return Case(grid=(-(-n // block),), block=(block,), sizes={"n": n})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    pos = np.empty((n, 4))
    pos[:, :3] = rng.uniform(-1.0, 1.0, (n, 3))
    pos[:, 3] = rng.uniform(0.5, 1.5, n) / n  # masses, total about 1
    vel = np.zeros((n, 4))
    vel[:, :3] = rng.uniform(-0.1, 0.1, (n, 3))
    vel[:, 3] = 0.0
    return {
        "pos": np.ascontiguousarray(pos.reshape(-1), dtype=np.float32),
        "vel": np.ascontiguousarray(vel.reshape(-1), dtype=np.float32),
        "new_pos": np.zeros(4 * n, dtype=np.float32),
        "new_vel": np.zeros(4 * n, dtype=np.float32),
        "n": np.int32(n),
        "dt": np.float32(0.01),
        "eps2": np.float32(0.01),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    pos = args["pos"].astype(np.float64).reshape(-1, 4)
    vel = args["vel"].astype(np.float64).reshape(-1, 4)
    dt, eps2 = float(args["dt"]), float(args["eps2"])
    p, m = pos[:, :3], pos[:, 3]
    d = p[None, :, :] - p[:, None, :]                   # d[i, j] = p_j - p_i
    r2 = np.einsum("ijk,ijk->ij", d, d) + eps2
    acc = np.einsum("ij,ijk->ik", m[None, :] * r2 ** -1.5, d)
    new_vel = vel.copy()
    new_vel[:, :3] += dt * acc
    new_pos = pos.copy()
    new_pos[:, :3] += dt * new_vel[:, :3]
    return {"new_pos": new_pos.reshape(-1), "new_vel": new_vel.reshape(-1)}


SAMPLE = Sample(
    name="nbody_step",
    kernel="nbody_step",
    cases=(
        _case(700, 128),    # partial last block and last tile
        _case(512, 64),     # exact
        _case(77, 32),      # small, ragged
    ),
    make_args=make_args,
    reference=reference,
    outputs=("new_pos", "new_vel"),
    rtol=1e-4,
    atol=1e-5,
    description="n-body step with float4 bodies, rsqrtf and a shared-memory tile loop",
    features=("shared", "barrier", "barrier-in-loop", "float4"),
)
