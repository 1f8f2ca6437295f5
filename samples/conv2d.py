"""conv2d: 5x5 correlation with zero padding on a 2-D grid."""
from __future__ import annotations

import numpy as np

from samples.spec import Case, Sample

MR = 2


def _case(height: int, width: int, bx: int, by: int) -> Case:
    return Case(grid=(-(-width // bx), -(-height // by)), block=(bx, by), sizes={"height": height, "width": width})


def make_args(rng: np.random.Generator, case: Case, real: type) -> dict:
    h, w = case.sizes["height"], case.sizes["width"]
    return {
        "img": np.ascontiguousarray(rng.uniform(0.0, 1.0, h * w), dtype=real),  # h rows of w
        "mask": np.ascontiguousarray(rng.uniform(-0.2, 0.2, (2 * MR + 1) ** 2), dtype=real),
        "out": np.zeros(h * w, dtype=real),
        "height": np.int32(h),
        "width": np.int32(w),
    }


def reference(args: dict, case: Case) -> dict[str, np.ndarray]:
    h, w = int(args["height"]), int(args["width"])
    img = args["img"].astype(np.float64).reshape(h, w)
    mask = args["mask"].astype(np.float64).reshape(2 * MR + 1, 2 * MR + 1)
    padded = np.pad(img, MR)
    out = np.zeros((h, w))
    for dy in range(-MR, MR + 1):
        for dx in range(-MR, MR + 1):
            out += mask[dy + MR, dx + MR] * padded[MR + dy: MR + dy + h, MR + dx: MR + dx + w]
    return {"out": out.reshape(-1)}


SAMPLE = Sample(
    name="conv2d",
    kernel="conv2d",
    cases=(
        _case(64, 64, 16, 16),   # exact
        _case(45, 70, 16, 8),    # partial blocks
        _case(3, 4, 8, 8),       # smaller than the mask
    ),
    make_args=make_args,
    reference=reference,
    outputs=("out",),
    rtol=1e-5,
    atol=1e-5,
    real=True,
    differentiable=True,
    wrt=("img", "mask"),
    description="2-D 5x5 convolution with zero padding, continue in the tap loop",
    features=("early-return",),
)
