"""gemm: C = alpha A B + beta C with macro row strides (NK, NJ) and argument bounds (PolyBench style)."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample

NJ = NK = 64  # the storage row lengths (samples.spec passes them as -D)


def _case(ni: int, nj: int, nk: int, block: tuple[int, int] = (32, 8)) -> Case:
    return Case(grid=(-(-nj // block[0]), -(-ni // block[1])), block=block, sizes={"ni": ni, "nj": nj, "nk": nk})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    ni, nj, nk = case.sizes["ni"], case.sizes["nj"], case.sizes["nk"]
    njs, nks = case.sizes.get("NJ", NJ), case.sizes.get("NK", NK)
    return {
        "ni": np.int32(ni), "nj": np.int32(nj), "nk": np.int32(nk),
        "alpha": real(1.5), "beta": real(0.5),
        "a": np.ascontiguousarray(rng.uniform(-1.0, 1.0, ni * nks), dtype=real),   # ni x NK
        "b": np.ascontiguousarray(rng.uniform(-1.0, 1.0, nk * njs), dtype=real),   # nk x NJ
        "c": np.ascontiguousarray(rng.uniform(-1.0, 1.0, ni * njs), dtype=real),   # ni x NJ
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    ni, nj, nk = int(args["ni"]), int(args["nj"]), int(args["nk"])
    njs, nks = case.sizes.get("NJ", NJ), case.sizes.get("NK", NK)
    a = args["a"].astype(np.float64).reshape(ni, nks)[:, :nk]
    b = args["b"].astype(np.float64).reshape(nk, njs)[:, :nj]
    c = args["c"].astype(np.float64).reshape(ni, njs).copy()
    c[:, :nj] = float(args["alpha"]) * (a @ b) + float(args["beta"]) * c[:, :nj]
    return {"c": c.reshape(-1)}


SAMPLE = Sample(
    name="gemm",
    kernel="gemm",
    cases=(
        _case(64, 64, 64),    # the whole storage
        _case(40, 50, 30),    # smaller bounds than the storage: partial blocks, unused columns
        _case(17, 64, 64, (16, 16)),
    ),
    make_args=make_args,
    reference=reference,
    outputs=("c",),
    rtol=1e-4,
    atol=1e-4,
    real=True,
    differentiable=True,
    wrt=("a", "b", "c"),
    defines={"NJ": str(NJ), "NK": str(NK)},
    description="PolyBench-style gemm: macro row strides, argument bounds, a serial k loop into global memory",
    features=("2d-grid", "loop"),
)
