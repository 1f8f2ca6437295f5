"""gridstride_while: digit sums (do-while) and bit lengths (while) over a grid-stride loop."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    n = case.sizes["n"]
    values = rng.integers(0, 2**31 - 1, n)
    values[::7] = rng.integers(0, 1000, values[::7].size)  # short loops too
    values[:3] = [0, 9, 2**31 - 1]
    return {
        "in": np.ascontiguousarray(values, dtype=np.int32),
        "digit_sum": np.zeros(n, dtype=np.int32),
        "bit_len": np.zeros(n, dtype=np.int32),
        "n": np.int32(n),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    values = args["in"].astype(np.int64)
    digits = np.array([sum(int(ch) for ch in str(int(v))) for v in values], dtype=np.int32)
    bits = np.array([int(v).bit_length() for v in values], dtype=np.int32)
    return {"digit_sum": digits, "bit_len": bits}


SAMPLE = Sample(
    name="gridstride_while",
    kernel="gridstride_while",
    cases=(
        Case(grid=(4,), block=(128,), sizes={"n": 5000}),   # ~10 grid-stride iterations, ragged
        Case(grid=(16,), block=(256,), sizes={"n": 3000}),  # more threads than elements
    ),
    make_args=make_args,
    reference=reference,
    outputs=("digit_sum", "bit_len"),
    rtol=0.0,
    atol=0.0,
    description="grid-stride loop containing a do-while and a while loop",
    features=("while", "do-while"),
)
