"""Every differentiable sample: reverse and forward mode against finite differences (float64).

Each sample marked ``differentiable`` is compiled with ``REAL=double``; its gradient kernel
(``K_grad``) and tangent kernel (``K_fwd``) come from ``polypy.driver.gradients.grad_kernel`` (the
full pipeline: optimize, differentiate, simplify). On the sample's smallest launch and its
random inputs, along random directions ``v`` (inputs) and ``w`` (outputs):

* ``<w, (K(x+hv) - K(x-hv)) / 2h>`` (central differences, emulator) ==
* ``<v, J^T w>`` (``K_grad``, shadows seeded with ``w``) ==
* ``<w, J v>`` (``K_fwd``, tangents ``v``): the dot-product test;

``K_grad`` also reproduces K's outputs, and the emulator's race detector stays silent on both.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from autodiff.check import check_gradients
from polypy.driver.gradients import grad_kernel
from samples.spec import all_samples

SAMPLES = [s for s in all_samples() if s.differentiable]


def _smallest(sample):
    def work(case):
        threads = int(np.prod(case.grid)) * int(np.prod(case.block))
        return threads + sum(case.sizes.values())
    return min(sample.cases, key=work)


def test_there_are_differentiable_samples() -> None:
    assert len(SAMPLES) >= 15
    assert all(s.real for s in SAMPLES), "differentiable samples are checked in float64 (REAL=double)"


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.name)
def test_reverse_and_forward_match_finite_differences(sample) -> None:
    module = polypy.load(sample.source, defines={**sample.defines, "REAL": "double"})
    k = module.kernel(sample.kernel)
    k_grad = grad_kernel(module, sample.kernel, wrt=sample.wrt)
    k_fwd = grad_kernel(module, sample.kernel, wrt=sample.wrt, mode="forward")
    case = _smallest(sample)
    args = sample.make_args(np.random.default_rng(7), case, np.float64)
    dynamic = any(b.space == "shared" and b.shape is None for b in k.buffers)
    globals_ = {g.name: np.array(g.init, dtype=g.elem.dtype).reshape(-1) for g in module.globals
                if g.init is not None}
    result = check_gradients(k, k_grad, case.grid, case.block, args, k_fwd=k_fwd, shmem=case.shmem,
                             grad_shmem=case.shmem * (2 if dynamic else 1), globals=globals_, seed=3)
    assert abs(result.finite_difference) > 1e-8, "the check must see a non-zero derivative"
    assert result.error() < 1e-6, result
    # the dot-product test (both are exact up to rounding)
    assert result.forward is not None
    assert abs(result.forward - result.reverse) <= 1e-9 * max(1.0, abs(result.reverse)), result
    assert result.forward_effect_error <= 1e-12 * max(1.0, float(np.max(np.abs(
        np.concatenate([np.asarray(args[p], dtype=np.float64).ravel() for p in sample.outputs]))))), result
