"""transpose_tiled: out = in.T through a padded 32x33 shared tile, block (32, 8)."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample

TILE_DIM = 32
BLOCK_ROWS = 8


def _case(rows: int, cols: int) -> Case:
    grid = (-(-cols // TILE_DIM), -(-rows // TILE_DIM))
    return Case(grid=grid, block=(TILE_DIM, BLOCK_ROWS), sizes={"rows": rows, "cols": cols})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    rows, cols = case.sizes["rows"], case.sizes["cols"]
    return {
        "in": np.ascontiguousarray(rng.uniform(-10.0, 10.0, rows * cols), dtype=np.float32),  # rows x cols
        "out": np.zeros(cols * rows, dtype=np.float32),  # cols x rows
        "rows": np.int32(rows),
        "cols": np.int32(cols),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    rows, cols = int(args["rows"]), int(args["cols"])
    return {"out": args["in"].reshape(rows, cols).T.reshape(-1)}


SAMPLE = Sample(
    name="transpose_tiled",
    kernel="transpose_tiled",
    cases=(
        _case(64, 96),    # whole tiles, non-square
        _case(70, 45),    # partial tiles on both edges
        _case(33, 200),   # one full and one 1-row tile
    ),
    make_args=make_args,
    reference=reference,
    outputs=("out",),
    rtol=0.0,
    atol=0.0,
    description="tiled transpose through a padded shared tile, each thread copying 4 rows",
    features=("shared", "barrier"),
)
