"""Stand-ins for sample references that do not scale to benchmark sizes.

``nbody_step``'s reference builds n x n x 3 float64 arrays and ``spmv_csr``'s a dense
nrows x ncols matrix; at benchmark sizes those are gigabytes. The functions here compute the
same thing in float64 with bounded memory; ``bench/check.py`` compares them with the samples' own
references on the samples' test cases, so they cannot drift apart unnoticed.
"""
from __future__ import annotations

import numpy as np

from samples.spec import Case


def nbody_accelerations(pos: np.ndarray, eps2: float, dtype: type, *, chunk: int = 256) -> np.ndarray:
    """a_i = sum_j m_j (p_j - p_i) / (|p_j - p_i|^2 + eps2)^(3/2), computed in ``dtype``, in
    chunks of ``chunk`` bodies i so that temporaries stay at chunk x n."""
    p = pos.reshape(-1, 4)[:, :3].astype(dtype)
    m = pos.reshape(-1, 4)[:, 3].astype(dtype)
    acc = np.empty_like(p)
    for i0 in range(0, p.shape[0], chunk):
        d = p[None, :, :] - p[i0:i0 + chunk, None, :]       # d[i, j] = p_j - p_i
        r2 = np.einsum("ijk,ijk->ij", d, d) + dtype(eps2)
        inv_r = 1 / np.sqrt(r2)
        acc[i0:i0 + chunk] = np.einsum("ij,ijk->ik", m[None, :] * inv_r * inv_r * inv_r, d)
    return acc


def nbody_step(args: dict, case: Case) -> dict[str, np.ndarray]:
    """``samples/nbody_step.py``'s reference, chunked."""
    dt = float(args["dt"])
    acc = nbody_accelerations(args["pos"], float(args["eps2"]), np.float64)
    new_vel = args["vel"].astype(np.float64).reshape(-1, 4)
    new_vel[:, :3] += dt * acc
    new_pos = args["pos"].astype(np.float64).reshape(-1, 4)
    new_pos[:, :3] += dt * new_vel[:, :3]
    return {"new_pos": new_pos.reshape(-1), "new_vel": new_vel.reshape(-1)}


def spmv_csr(args: dict, case: Case) -> dict[str, np.ndarray]:
    """``samples/spmv_csr.py``'s reference without the dense matrix."""
    nrows = int(args["nrows"])
    rows = np.repeat(np.arange(nrows), np.diff(args["row_ptr"]))
    products = args["vals"].astype(np.float64) * args["x"].astype(np.float64)[args["col_idx"]]
    return {"y": np.bincount(rows, weights=products, minlength=nrows)}


# sample name -> reference used at benchmark sizes instead of the sample's own
SCALABLE_REFERENCES = {"nbody_step": nbody_step, "spmv_csr": spmv_csr}
