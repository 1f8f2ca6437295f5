"""``polypy.grad(mod.K, wrt=...)``: a compiled, launchable gradient that agrees with the emulator."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from samples.spec import sample


def _args(s, case):
    return s.make_args(np.random.default_rng(7), case, np.float64)


@pytest.mark.parametrize("name", ["saxpy", "stencil1d", "reduce_sum", "conv2d", "matmul_tiled", "layernorm", "softmax_rows"])
def test_compiled_gradient_matches_emulated_gradient(name: str) -> None:
    s = sample(name)
    mod = polypy.compile(s.source, defines={**s.defines, "REAL": "double"})
    g = polypy.grad(getattr(mod, s.kernel), wrt=list(s.wrt))
    case = s.cases[0]
    results = []
    for run in (lambda cfg: g[cfg], lambda cfg: g.emulate[cfg]):
        args = _args(s, case)
        full = {}
        rng = np.random.default_rng(11)
        for p in g.gpu.params:
            if p.name in args:
                full[p.name] = args[p.name]
            else:  # a shadow: seeds for outputs, zeros for the rest
                primal = args[p.name[2:]]
                shape = np.shape(primal) if isinstance(primal, np.ndarray) else (1,)
                full[p.name] = rng.standard_normal(shape) if p.name[2:] in s.outputs else np.zeros(shape)
        run((case.grid, case.block, case.shmem))(**full)
        results.append({k: v.copy() for k, v in full.items() if k.startswith("d_")})
    compiled, emulated = results
    for k in compiled:
        np.testing.assert_allclose(compiled[k], emulated[k], rtol=1e-10, atol=1e-12, err_msg=k)


def test_grad_rejects_what_is_not_a_compiled_kernel() -> None:
    with pytest.raises(polypy.UserError, match="compiled kernel"):
        polypy.grad("saxpy")
