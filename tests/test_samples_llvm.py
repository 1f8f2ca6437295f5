"""Every sample compiled for the CPU (frontend -> GPU pipeline -> to_cpu -> LLVM JIT, through
``polypy.compile``), on every launch shape, against its NumPy reference; the first shape also
against the reference emulator and against a one-thread launch. Samples written with ``REAL`` also
run in float64."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from test_llvm_support import isolated_cache
from test_samples_emulator import check_sample_case

import polypy
from polypy.emulator import emulate
from samples.spec import Sample, all_samples

pytestmark = pytest.mark.usefixtures("isolated_cache")
assert isolated_cache

SAMPLES = all_samples()


@functools.cache
def _compiled(name: str, real: type) -> polypy.driver.api.CompiledModule:
    s = next(s for s in SAMPLES if s.name == name)
    defines = dict(s.defines)
    if real is np.float64:
        defines["REAL"] = "double"
    return polypy.compile(s.source, defines=defines)


def _copy(args: dict) -> dict:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def _runner(s: Sample, real: type, case_index: int):
    """Runs the compiled kernel; on the first case also the emulator and a one-thread launch."""

    def run(kernel, case, args):
        module = _compiled(s.name, real)
        launch = module[s.kernel][case.grid, case.block, case.shmem]
        if case_index != 0:
            launch(**args)
            return
        emulated, serial = _copy(args), _copy(args)
        emulate(kernel, case.grid, case.block, emulated, shmem=case.shmem)
        launch(**args)
        module.threads = 1
        try:
            launch(**serial)
        finally:
            module.threads = None
        tol = dict(rtol=s.rtol, atol=s.atol) if real is np.float32 else dict(rtol=1e-9, atol=1e-9)
        for out in s.outputs:
            got = np.asarray(args[out], np.float64)
            np.testing.assert_allclose(got, np.asarray(emulated[out], np.float64),
                                       err_msg=f"{s.name} {case} output {out}: compiled vs emulated", **tol)
            if "atomics" not in s.features:  # float atomics may round in another order
                np.testing.assert_array_equal(got, np.asarray(serial[out], np.float64),
                                              err_msg=f"{s.name} {case} output {out}: one thread vs all")

    return run


def _cases(only_real: bool = False):
    for s in SAMPLES:
        if only_real and not s.real:
            continue
        for i, case in enumerate(s.cases):
            yield pytest.param(s, i, id=f"{s.name}-{case}")


@pytest.mark.parametrize("s,case_index", list(_cases()))
def test_sample_compiled(s: Sample, case_index: int) -> None:
    check_sample_case(s, case_index, np.float32, _runner(s, np.float32, case_index))


@pytest.mark.parametrize("s,case_index", list(_cases(only_real=True)))
def test_sample_compiled_float64(s: Sample, case_index: int) -> None:
    check_sample_case(s, case_index, np.float64, _runner(s, np.float64, case_index))
