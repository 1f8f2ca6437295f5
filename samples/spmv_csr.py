"""spmv_csr: y = A x for a CSR matrix, one thread per row (data-dependent loop bounds, gather)."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    nrows, ncols = case.sizes["nrows"], case.sizes["ncols"]
    # Row lengths from 0 (empty rows) to 3 * mean, sorted random distinct columns per row.
    mean = case.sizes["mean_nnz"]
    lengths = rng.integers(0, 3 * mean + 1, nrows)
    lengths[: nrows // 10] = 0
    rng.shuffle(lengths)
    lengths = np.minimum(lengths, ncols)
    row_ptr = np.concatenate([[0], np.cumsum(lengths)])
    col_idx = np.concatenate([np.sort(rng.choice(ncols, size=k, replace=False)) for k in lengths])
    nnz = int(row_ptr[-1])
    return {
        "nrows": np.int32(nrows),
        "row_ptr": np.ascontiguousarray(row_ptr, dtype=np.int32),
        "col_idx": np.ascontiguousarray(col_idx, dtype=np.int32),
        "vals": np.ascontiguousarray(rng.uniform(-1.0, 1.0, nnz), dtype=real),
        "x": np.ascontiguousarray(rng.uniform(-1.0, 1.0, ncols), dtype=real),
        "y": np.zeros(nrows, dtype=real),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    nrows, ncols = int(args["nrows"]), args["x"].size
    row_ptr = args["row_ptr"]
    dense = np.zeros((nrows, ncols))
    rows = np.repeat(np.arange(nrows), np.diff(row_ptr))
    dense[rows, args["col_idx"]] = args["vals"].astype(np.float64)
    return {"y": dense @ args["x"].astype(np.float64)}


SAMPLE = Sample(
    name="spmv_csr",
    kernel="spmv_csr",
    cases=(
        Case(grid=(8,), block=(128,), sizes={"nrows": 1000, "ncols": 800, "mean_nnz": 8}),
        Case(grid=(4,), block=(64,), sizes={"nrows": 256, "ncols": 300, "mean_nnz": 20}),
    ),
    make_args=make_args,
    reference=reference,
    outputs=("y",),
    rtol=1e-4,
    atol=1e-5,
    real=True,
    differentiable=True,
    wrt=("vals", "x"),
    description="scalar CSR SpMV: loop bounds loaded from memory, indirect gather",
    features=(),
)
