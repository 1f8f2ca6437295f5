"""texture_rotate: an image rotated through a texture object, quantized with surface writes, read
back through a normalized-float texture (docs/textures.md); expected output from CUDA's formulas."""
from __future__ import annotations

import numpy as np

from samples.spec import ProgramSample
from samples.texture_reference import CLAMP, WRAP, sample

W, H = 20, 12
f32 = np.float32


def _rotated() -> np.ndarray:
    img = np.array([[((x * 7 + y * 13) % 17) * 0.125 - 1.0 for x in range(W)] for y in range(H)], dtype=f32)
    c, s = f32(0.8), f32(0.6)
    out = np.zeros((H, W), dtype=f32)
    for y in range(H):
        for x in range(W):
            u = f32(f32(f32(x) / f32(W)) - f32(0.5))
            v = f32(f32(f32(y) / f32(H)) - f32(0.5))
            tu = f32(f32(f32(u * c) - f32(v * s)) + f32(0.5))
            tv = f32(f32(f32(v * c) + f32(u * s)) + f32(0.5))
            # normalized coordinates, wrap: frac, then scaled by the size
            cu = f32(f32(tu - np.floor(tu)) * f32(W))
            cv = f32(f32(tv - np.floor(tv)) * f32(H))
            out[y, x] = sample(img, [cu, cv], True, [WRAP, WRAP])
    return out


def expected_stdout() -> str:
    out = _rotated()
    flat = out.ravel()
    mid = W * H // 2 + 3
    q = np.clip(f32(64.0) * flat + f32(128.0), f32(0.0), f32(255.0)).astype(np.uint8).astype(np.int64)
    xs, ys = np.meshgrid(np.arange(W), np.arange(H))
    channels = [q, 255 - q, xs.ravel(), ys.ravel()]
    lines = [f"rotated: sum = {flat.astype(np.float64).sum():.5f}, out[0] = {flat[0]:.6f}, out[{mid}] = {flat[mid]:.6f}",
             "quantized: " + " ".join(str(int(ch.sum())) for ch in channels)]
    planes = [(ch.astype(f32) / f32(255)).astype(f32).reshape(H, W) for ch in channels]
    back = np.zeros((H, W), dtype=f32)
    for y in range(H):
        for x in range(W):
            point = [f32(f32(x) + f32(0.75)), f32(f32(y) - f32(0.25))]
            total = f32(0.0)
            for plane in planes:
                total = f32(total + sample(plane, point, False, [CLAMP, CLAMP]))
            back[y, x] = total
    lines.append(f"normalized: sum = {back.astype(np.float64).sum():.5f}, back[{W + 1}] = {back.ravel()[W + 1]:.6f}")
    return "\n".join(lines) + "\n"


PROGRAM = ProgramSample(
    name="texture_rotate",
    expected_stdout=expected_stdout,
    float_rtol=1e-5,
    description="CUDA arrays, a linear-filtered wrapped texture object, surface writes, a normalized-float texture",
)
