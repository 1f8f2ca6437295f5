"""Differentiate after optimization: vector normalization goes from O(n^2) to O(n).

``tests/golden/autodiff/vecnorm_loop.cu`` computes ``out[i] = in[i] / mag(in)`` in a loop, with
``mag`` a looping ``__device__`` function (the Enzyme talk's example; the ``vecnorm`` sample
computes one element per thread, so there is no loop for ``mag`` to leave). The gradient
pipeline hoists ``mag`` out of the loop before differentiating (``hoist_invariants``), so both
sweeps do O(n) work; differentiating the unoptimized kernel recomputes ``mag`` per reversed
iteration: O(n^2). Work is counted, not timed: every loop body of the gradient kernel is
instrumented to count its iterations in the emulator.
"""
from __future__ import annotations

import dataclasses
import pathlib

import numpy as np
import pytest

import polypy
from autodiff.check import check_gradients
from polypy.emulator import emulate
from polypy.driver.gradients import grad_kernel
from polypy.ir import nodes as n
from polypy.ir.types import I64, PointerType
from polypy.ir.visitor import Mutator, walk

SOURCE = pathlib.Path(__file__).parent / "golden" / "autodiff" / "vecnorm_loop.cu"


class _CountIterations(Mutator):
    def _count(self, body):
        return (n.AtomicRMW("add", "work", (n.Const(0, I64),), n.Const(1, I64)),) + body

    def visit_For(self, s):
        s = self.generic_visit(s)
        return dataclasses.replace(s, body=self._count(s.body))

    def visit_While(self, s):
        s = self.generic_visit(s)
        return dataclasses.replace(s, body=self._count(s.body))


def iterations(kernel: n.Kernel, size: int) -> int:
    """Loop iterations executed by ``kernel`` (one thread) on a vector of ``size`` elements."""
    counted = _CountIterations().visit(kernel)
    counted = dataclasses.replace(counted, params=counted.params + (n.Param("work", PointerType(I64)),))
    rng = np.random.default_rng(size)
    args = {"in": rng.uniform(0.5, 1.5, size), "out": np.zeros(size), "n": size, "work": np.zeros(1, np.int64)}
    for p in kernel.params:
        if p.name.startswith("d_"):
            args[p.name] = rng.standard_normal(size)
    emulate(counted, 1, 1, args)
    return int(args["work"][0])


def loop_depth(kernel: n.Kernel) -> int:
    def depth(stmts) -> int:
        best = 0
        for s in stmts:
            if isinstance(s, (n.For, n.While)):
                best = max(best, 1 + depth(s.body))
            elif isinstance(s, n.If):
                best = max(best, depth(s.then), depth(s.orelse))
        return best
    return depth(kernel.body)


@pytest.fixture(scope="module")
def module():
    return polypy.load(SOURCE)


def test_the_kernel_itself_is_quadratic(module) -> None:
    k = module.kernel("normalize")
    assert loop_depth(k) == 2


@pytest.mark.parametrize("optimize", [True, False])
def test_both_gradients_are_right(module, optimize: bool) -> None:
    k = module.kernel("normalize")
    g = grad_kernel(module, "normalize", optimize=optimize)
    f = grad_kernel(module, "normalize", optimize=optimize, mode="forward")
    args = {"in": np.random.default_rng(0).uniform(0.5, 1.5, 12), "out": np.zeros(12), "n": 12}
    result = check_gradients(k, g, 1, 1, args, k_fwd=f)
    assert result.error() < 1e-7, result


def test_optimized_gradient_is_linear_unoptimized_quadratic(module) -> None:
    fast = grad_kernel(module, "normalize")
    slow = grad_kernel(module, "normalize", optimize=False)
    assert loop_depth(fast) == 1  # no loop inside another: mag is computed and differentiated once
    assert loop_depth(slow) == 2
    sizes = (8, 16, 32)
    fast_work = [iterations(fast, s) for s in sizes + (64,)]
    slow_work = [iterations(slow, s) for s in sizes]
    for (a, b) in zip(fast_work, fast_work[1:]):
        assert b / a < 2.2, fast_work  # doubling n doubles the work
    for (a, b) in zip(slow_work, slow_work[1:]):
        assert b / a > 3.5, slow_work  # doubling n quadruples it
    assert fast_work[-1] <= 4 * 64 + 4  # two sweeps over two loops of n
    assert slow_work[-1] > 10 * fast_work[2]


def test_hoisting_is_what_makes_the_difference(module) -> None:
    from polypy.passes.hoist_invariants import hoist_invariants
    k = module.kernel("normalize")
    hoisted = hoist_invariants(k, assume_noalias=True)
    assert loop_depth(hoisted) == 1
    # without restrict (or the gradient's no-overlap assumption) the loads of in could see out's stores
    plain = dataclasses.replace(k, params=tuple(
        dataclasses.replace(p, ptype=PointerType(p.ptype.elem, const=p.ptype.const)) if isinstance(p.ptype, PointerType)
        else p for p in k.params))
    assert loop_depth(hoist_invariants(plain)) == 2
    assert any(isinstance(s, n.If) for s in walk(hoisted))  # guarded: runs only if the loop would
