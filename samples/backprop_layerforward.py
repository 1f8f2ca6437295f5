"""backprop_layerforward: per-slab partial sums of input @ weights (Rodinia-style layerforward)."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample

WIDTH = 16
HEIGHT = 16


def _case(n_in: int, hid: int) -> Case:
    return Case(grid=(hid // WIDTH, n_in // HEIGHT), block=(WIDTH, HEIGHT), sizes={"n_in": n_in, "hid": hid})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n_in, hid = case.sizes["n_in"], case.sizes["hid"]
    return {
        "input": np.ascontiguousarray(rng.uniform(0.0, 1.0, n_in), dtype=real),
        "weights": np.ascontiguousarray(rng.uniform(-1.0, 1.0, n_in * hid), dtype=real),  # n_in x hid
        "partial_sums": np.zeros(n_in // HEIGHT * hid, dtype=real),  # (n_in / HEIGHT) x hid
        "hid": np.int32(hid),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    x = args["input"].astype(np.float64)
    n_in, hid = x.size, int(args["hid"])
    w = args["weights"].astype(np.float64).reshape(n_in, hid)
    # Slab by of HEIGHT input units contributes sum_ty x[ty] * w[ty, :].
    contrib = (x[:, None] * w).reshape(n_in // HEIGHT, HEIGHT, hid)
    return {"partial_sums": contrib.sum(axis=1).reshape(-1)}


SAMPLE = Sample(
    name="backprop_layerforward",
    kernel="backprop_layerforward",
    cases=(
        _case(64, 16),     # Rodinia's shape: one column of blocks, 16 hidden units
        _case(128, 48),    # several blocks in both dimensions
        _case(16, 32),     # a single row of blocks
    ),
    make_args=make_args,
    reference=reference,
    outputs=("partial_sums",),
    rtol=1e-5,
    atol=1e-5,
    real=True,
    differentiable=True,
    wrt=("input", "weights"),
    description="layer forward with an unnecessary barrier, a forwardable shared load and a tree reduction",
    features=("shared", "barrier", "barrier-in-loop"),
)
