"""gru_cell: element-wise GRU gates (sigmoid, tanh) on a 2-D (unit, batch) grid."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def _case(batch: int, hidden: int, bx: int, by: int) -> Case:
    return Case(grid=(-(-hidden // bx), -(-batch // by)), block=(bx, by), sizes={"batch": batch, "hidden": hidden})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    batch, hidden = case.sizes["batch"], case.sizes["hidden"]
    return {
        "xg": np.ascontiguousarray(rng.normal(0.0, 1.0, batch * 3 * hidden), dtype=real),  # batch x 3*hidden
        "hg": np.ascontiguousarray(rng.normal(0.0, 1.0, batch * 3 * hidden), dtype=real),
        "h": np.ascontiguousarray(rng.uniform(-1.0, 1.0, batch * hidden), dtype=real),  # batch x hidden
        "h_new": np.zeros(batch * hidden, dtype=real),
        "batch": np.int32(batch),
        "hidden": np.int32(hidden),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    batch, hidden = int(args["batch"]), int(args["hidden"])
    xz, xr, xc = np.split(args["xg"].astype(np.float64).reshape(batch, 3 * hidden), 3, axis=1)
    hz, hr, hc = np.split(args["hg"].astype(np.float64).reshape(batch, 3 * hidden), 3, axis=1)
    h = args["h"].astype(np.float64).reshape(batch, hidden)
    z = 1.0 / (1.0 + np.exp(-(xz + hz)))
    r = 1.0 / (1.0 + np.exp(-(xr + hr)))
    c = np.tanh(xc + r * hc)
    return {"h_new": ((1.0 - z) * c + z * h).reshape(-1)}


SAMPLE = Sample(
    name="gru_cell",
    kernel="gru_cell",
    cases=(
        _case(8, 128, 64, 4),    # exact
        _case(13, 100, 32, 4),   # partial blocks in both dimensions
    ),
    make_args=make_args,
    reference=reference,
    outputs=("h_new",),
    rtol=1e-5,
    atol=1e-6,
    real=True,
    differentiable=True,
    wrt=("xg", "hg", "h"),
    description="GRU cell element-wise gate math with a __device__ sigmoid",
    features=("device-fn",),
)
