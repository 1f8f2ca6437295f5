"""Every sample, through the frontend and the reference emulator, against its NumPy reference.

Samples written with ``REAL`` also run compiled for float64 (``-DREAL=double``), which is how the
gradient tests use them.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from polypy.emulator import emulate
from samples.spec import Sample, all_samples

SAMPLES = all_samples()


def _cases():
    for s in SAMPLES:
        for i, case in enumerate(s.cases):
            yield pytest.param(s, i, id=f"{s.name}-{case}")


def check_sample_case(s: Sample, case_index: int, real: type, run) -> None:
    """Run ``run(kernel, case, args)`` on fresh inputs and compare every output with the reference."""
    defines = dict(s.defines)
    if real is np.float64:
        defines["REAL"] = "double"
    module = polypy.load(s.source, defines=defines)
    kernel = module.kernel(s.kernel)
    case = s.cases[case_index]
    args = s.make_args(np.random.default_rng(1234 + case_index), case, real)
    pristine = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    expected = s.reference(pristine, case)
    run(kernel, case, args)
    tol = dict(rtol=s.rtol, atol=s.atol) if real is np.float32 else dict(rtol=1e-9, atol=1e-9)
    for out in s.outputs:
        np.testing.assert_allclose(np.asarray(args[out], dtype=np.float64), np.asarray(expected[out], dtype=np.float64),
                                   err_msg=f"{s.name} {case} output {out}", **tol)


def _emulate(kernel, case, args):
    emulate(kernel, case.grid, case.block, args, shmem=case.shmem)


@pytest.mark.parametrize("s,case_index", list(_cases()))
def test_sample_emulated(s: Sample, case_index: int) -> None:
    check_sample_case(s, case_index, np.float32, _emulate)


@pytest.mark.parametrize("s,case_index", [p for p in _cases() if p.values[0].real])
def test_sample_emulated_float64(s: Sample, case_index: int) -> None:
    check_sample_case(s, case_index, np.float64, _emulate)


def test_sample_corpus_covers_the_required_kernels() -> None:
    names = {s.name for s in SAMPLES}
    required = {"saxpy", "matmul_tiled", "reduce_sum", "transpose_tiled", "stencil1d", "histogram", "warp_reduce",
                "backprop_layerforward", "jacobi2d", "softmax_rows", "dp_sweep", "prefix_scan", "nbody_step",
                "relu3", "vecnorm", "grid3d"}
    assert required <= names, required - names
    for s in SAMPLES:
        assert len(s.cases) >= 2, f"{s.name} needs at least two launch shapes"
