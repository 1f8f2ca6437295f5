"""Checking generated derivatives against finite differences, with the emulator as the oracle.

For a kernel ``K`` seen as a map from the initial contents of its active buffers (and its
active scalars) to the final contents of its active buffers, and random directions ``v``
(inputs) and ``w`` (outputs), in float64:

* finite differences: ``<w, (K(x + h v) - K(x - h v)) / 2h>``;
* reverse mode: ``<v, J^T w>``, from ``K_grad`` with the shadows seeded with ``w``;
* forward mode: ``<w, J v>``, from ``K_fwd`` with tangents ``v``.

All three must agree (the last two to rounding: the dot-product test). ``K_grad`` must also
reproduce ``K``'s forward effect. Shadows are found by the calling convention: a parameter of
the gradient kernel that the original does not have, right after the one it shadows.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

from polypy.ir import nodes as n
from polypy.ir.types import PointerType


@dataclasses.dataclass(frozen=True)
class GradientCheck:
    finite_difference: float
    reverse: float
    forward: float | None
    forward_effect_error: float  # max |K_grad's primal outputs - K's|

    def error(self) -> float:
        """Largest relative disagreement between the estimates."""
        values = [self.reverse] + ([self.forward] if self.forward is not None else [])
        scale = max(abs(self.finite_difference), *(abs(v) for v in values), 1e-300)
        return max(abs(v - self.finite_difference) for v in values) / scale


def shadow_pairs(kernel: n.Kernel, derived: n.Kernel) -> dict[str, str]:
    """``primal parameter -> shadow parameter`` of a ``K_grad``/``K_fwd`` kernel."""
    names = {p.name for p in kernel.params}
    out = {}
    params = derived.params
    for i, p in enumerate(params[:-1]):
        if p.name in names and params[i + 1].name not in names:
            out[p.name] = params[i + 1].name
    return out


def _copy(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def _emulate(kernel: n.Kernel, grid, block, args: dict[str, Any], shmem: int, globals_) -> dict[str, Any]:
    from polypy.emulator import emulate

    globs = {k: v.copy() for k, v in (globals_ or {}).items()}
    emulate(kernel, grid, block, args, shmem=shmem, globals=globs)
    return args


def check_gradients(kernel: n.Kernel, k_grad: n.Kernel, grid, block, args: Mapping[str, Any], *,
                    k_fwd: n.Kernel | None = None, shmem: int = 0, grad_shmem: int | None = None,
                    globals: Mapping[str, np.ndarray] | None = None, seed: int = 0, h: float = 1e-6) -> GradientCheck:
    """Compare finite differences, ``k_grad`` (and ``k_fwd``) along random directions."""
    rng = np.random.default_rng(seed)
    pairs = shadow_pairs(kernel, k_grad)
    pointers = [p.name for p in kernel.params if p.name in pairs and isinstance(p.ptype, PointerType)]
    scalars = [p.name for p in kernel.params if p.name in pairs and not isinstance(p.ptype, PointerType)]
    grad_shmem = shmem if grad_shmem is None else grad_shmem
    base = _copy(args)

    def outputs(a: dict[str, Any]) -> np.ndarray:
        _emulate(kernel, grid, block, a, shmem, globals)
        return np.concatenate([np.asarray(a[p], dtype=np.float64).ravel() for p in pointers]) if pointers \
            else np.zeros(0)

    v = {p: rng.standard_normal(np.shape(base[p])) for p in pointers + scalars}
    reference = outputs(_copy(base))
    w = rng.standard_normal(reference.shape)

    def shifted(sign: float) -> dict[str, Any]:
        a = _copy(base)
        for p in pointers:
            a[p] = (a[p] + sign * h * v[p]).astype(a[p].dtype)
        for p in scalars:
            a[p] = type(a[p])(a[p] + sign * h * v[p])
        return a

    fd = float(w @ ((outputs(shifted(1.0)) - outputs(shifted(-1.0))) / (2 * h)))

    # reverse: seeds w, results <v, J^T w>
    g = {}
    offset = 0
    for p in kernel.params:
        g[p.name] = base[p.name].copy() if isinstance(base[p.name], np.ndarray) else base[p.name]
        if p.name in pointers:
            size = base[p.name].size
            g[pairs[p.name]] = w[offset:offset + size].reshape(base[p.name].shape).astype(base[p.name].dtype)
            offset += size
        elif p.name in scalars:
            g[pairs[p.name]] = np.zeros(1, dtype=np.asarray(base[p.name]).dtype)
    _emulate(k_grad, grid, block, g, grad_shmem, globals)
    reverse = sum(float(np.sum(np.asarray(g[pairs[p]], dtype=np.float64) * v[p])) for p in pointers + scalars)
    effect = max((float(np.max(np.abs(np.asarray(g[p], dtype=np.float64).ravel()
                                       - reference[_slice(pointers, base, p)]))) if base[p].size else 0.0)
                 for p in pointers) if pointers else 0.0

    forward = None
    if k_fwd is not None:
        fpairs = shadow_pairs(kernel, k_fwd)
        f = {}
        for p in kernel.params:
            f[p.name] = base[p.name].copy() if isinstance(base[p.name], np.ndarray) else base[p.name]
            if p.name in pointers:
                f[fpairs[p.name]] = v[p.name].astype(base[p.name].dtype)
            elif p.name in scalars:
                f[fpairs[p.name]] = np.asarray(v[p.name], dtype=np.asarray(base[p.name]).dtype)[()]
        _emulate(k_fwd, grid, block, f, grad_shmem, globals)
        jv = np.concatenate([np.asarray(f[fpairs[p]], dtype=np.float64).ravel() for p in pointers])
        forward = float(w @ jv)
    return GradientCheck(fd, reverse, forward, effect)


def _slice(pointers: list[str], base: Mapping[str, Any], name: str) -> slice:
    start = 0
    for p in pointers:
        size = base[p].size
        if p == name:
            return slice(start, start + size)
        start += size
    raise KeyError(name)
