"""dp_sweep: min-cost path DP swept row by row by one block, with a block-uniform early break."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    tables, rows, cols = case.grid[0], case.sizes["rows"], case.sizes["cols"]
    # Table b draws its costs from [1 + b, 9 + b]: the path cost grows by at least 1 + b per row, so
    # later tables cross the budget (and break) earlier; the first ones finish all rows.
    offsets = np.arange(tables)[:, None, None]
    cost = rng.integers(1, 10, (tables, rows, cols)) + offsets
    return {
        "cost": np.ascontiguousarray(cost.reshape(-1), dtype=np.int32),  # tables x rows x cols
        "dp": np.full(tables * rows * cols, -1, dtype=np.int32),  # rows after a break stay -1
        "rows_done": np.zeros(tables, dtype=np.int32),
        "rows": np.int32(rows),
        "cols": np.int32(cols),
        "budget": np.int32(case.sizes["budget"]),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    rows, cols, budget = int(args["rows"]), int(args["cols"]), int(args["budget"])
    cost = args["cost"].astype(np.int64).reshape(-1, rows, cols)
    dp = args["dp"].astype(np.int64).reshape(cost.shape)  # astype copies
    tables = cost.shape[0]
    rows_done = np.zeros(tables, dtype=np.int64)
    for b in range(tables):
        dp[b, 0] = cost[b, 0]
        done = rows
        for r in range(1, rows):
            prev = dp[b, r - 1]
            left = np.concatenate([[np.iinfo(np.int64).max], prev[:-1]])
            right = np.concatenate([prev[1:], [np.iinfo(np.int64).max]])
            dp[b, r] = cost[b, r] + np.minimum(prev, np.minimum(left, right))
            if dp[b, r].min() > budget:
                done = r + 1
                break
        rows_done[b] = done
    return {"dp": dp.reshape(-1).astype(np.int32), "rows_done": rows_done.astype(np.int32)}


SAMPLE = Sample(
    name="dp_sweep",
    kernel="dp_sweep",
    cases=(
        Case(grid=(4,), block=(64,), sizes={"rows": 40, "cols": 100, "budget": 85}),   # 2 column passes
        Case(grid=(6,), block=(32,), sizes={"rows": 25, "cols": 20, "budget": 60}),    # idle threads
        Case(grid=(3,), block=(128,), sizes={"rows": 12, "cols": 128, "budget": 1000}),  # never breaks
    ),
    make_args=make_args,
    reference=reference,
    outputs=("dp", "rows_done"),
    rtol=0.0,
    atol=0.0,
    description="row-by-row DP sweep with barriers in the loop and a block-uniform break",
    features=("shared", "barrier", "barrier-in-loop", "break", "shared-atomics"),
)
