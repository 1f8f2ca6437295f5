"""CUDA's texture fetching formulas in NumPy, the reference of polypy's texture tests and samples.

Written from the CUDA Programming Guide's "Texture Fetching" appendix (not from polypy's runtime):
nearest point, linear filtering with weights in 1.8 fixed point, normalized coordinates, wrap /
clamp / mirror / border addressing, the cubemap face table. Single precision throughout, in the
order the formulas are written.
"""
from __future__ import annotations

import numpy as np

WRAP, CLAMP, MIRROR, BORDER = 0, 1, 2, 3
f32 = np.float32


def texel_index(i: int, n: int, mode: int) -> int:
    """Texel index i of n under an addressing mode; -1 for the border."""
    if 0 <= i < n:
        return i
    if mode == BORDER:
        return -1
    if mode == WRAP:
        return i % n
    if mode == MIRROR:
        p = i % (2 * n)
        return p if p < n else 2 * n - 1 - p
    return min(max(i, 0), n - 1)


def texel_coord(x: np.float32, n: int, mode: int, normalized: bool) -> np.float32:
    if not normalized:
        return f32(x)
    if mode == WRAP:
        x = f32(x - np.floor(x))
    elif mode == MIRROR:
        fl = np.floor(x)
        x = f32(x - fl) if int(fl) % 2 == 0 else f32(f32(1.0) - f32(x - fl))
    return f32(x * f32(n))


def sample(tex: np.ndarray, u: list, linear: bool, modes: list, border: float = 0.0) -> np.float32:
    """``tex`` indexed [z][y][x] (as many leading axes as the texture has dimensions, x last)."""
    dims = len(u)
    sizes = list(reversed(tex.shape))  # n along x, y, z

    def at(idx):
        where = []
        for k in range(dims):
            j = texel_index(idx[k], sizes[k], modes[k])
            if j < 0:
                return f32(border)
            where.append(j)
        return f32(tex[tuple(reversed(where))])

    if not linear:
        return at([int(np.floor(c)) for c in u])
    base, alpha = [], []
    for c in u:
        b = f32(c - f32(0.5))
        fl = f32(np.floor(b))
        base.append(int(fl))
        alpha.append(f32(np.rint(f32((b - fl) * f32(256.0))) / f32(256.0)))
    total = f32(0.0)
    for corner in range(1 << dims):
        idx, weight = list(base), f32(1.0)
        for k in range(dims):
            up = (corner >> k) & 1
            idx[k] += up
            weight = f32(weight * (alpha[k] if up else f32(f32(1.0) - alpha[k])))
        total = f32(total + f32(weight * at(idx)))
    return total


def fetch(tex, xs, linear, modes, normalized, border=0.0):
    dims = len(xs)
    sizes = list(reversed(tex.shape))
    return np.array([sample(tex, [texel_coord(f32(xs[k][i]), sizes[k], modes[k], normalized) for k in range(dims)],
                             linear, modes, border) for i in range(len(xs[0]))], dtype=np.float64)


def cube_face(x, y, z):
    """CUDA's cubemap table: the face and the face's normalized (s, t)."""
    ax, ay, az = abs(x), abs(y), abs(z)
    if ax >= ay and ax >= az:
        m, face, sc, tc = ax, (0 if x >= 0 else 1), (-z if x >= 0 else z), -y
    elif ay >= az:
        m, face, sc, tc = ay, (2 if y >= 0 else 3), x, (z if y >= 0 else -z)
    else:
        m, face, sc, tc = az, (4 if z >= 0 else 5), (x if z >= 0 else -x), -y
    s = f32(f32(f32(sc) / f32(m) + f32(1.0)) * f32(0.5))
    t = f32(f32(f32(tc) / f32(m) + f32(1.0)) * f32(0.5))
    return face, s, t


__all__ = ["BORDER", "CLAMP", "MIRROR", "WRAP", "cube_face", "fetch", "sample", "texel_coord", "texel_index"]
