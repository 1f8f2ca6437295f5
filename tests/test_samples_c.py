"""Every sample through the GPU -> CPU lowering and the C backend, on every launch shape.

Each case runs compiled (C, all cores) and in the reference emulator on the same inputs; both
must match the sample's NumPy reference within its tolerance, and each other (float atomics may
sum in a different order, so the comparison uses the sample's tolerance too). Samples written
with ``REAL`` also run as float64 through the C++ backend with bounds checks on, all of them in
one library. Each library is compiled once per module (and cached on disk by source hash), with
every launch shape's versions of its kernels compiled in (``block_shapes``: the versions a launch
of a new shape would compile on its own, made by the same stage), so a sample costs one C compile,
not one more per shape.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import polypy
from c_support import copy_args, need_compiler
from codegen.c import CLibrary
from polypy.driver.library import build_library
from polypy.driver.pipelines import to_cpu
from polypy.emulator import emulate
from polypy.launch import block_shape
from samples.spec import Sample, all_samples

SAMPLES = all_samples()


@functools.lru_cache(maxsize=None)
def _module(name: str, real: str):
    s = next(x for x in SAMPLES if x.name == name)
    defines = dict(s.defines)
    if real == "double":
        defines["REAL"] = "double"
    return polypy.load(s.source, defines=defines)


def _block_shapes(s: Sample, kernels) -> dict[str, list[tuple[int, int, int]]]:
    """The block shapes of the sample's cases, for its launched kernel, where a launch of a new
    shape would compile that shape's versions (``codegen.c.CLibrary``: not for kernels that use
    ``__constant__``/``__device__`` arrays, which keep their generic version)."""
    kernel = next(k for k in kernels if k.name == s.kernel)
    if any(b.space in ("constant", "device") for b in kernel.buffers):
        return {}
    return {s.kernel: list(dict.fromkeys(block_shape(case.block) for case in s.cases))}


@functools.lru_cache(maxsize=None)
def _c_library(name: str) -> CLibrary:
    module = _module(name, "float")
    s = next(x for x in SAMPLES if x.name == name)
    kernels = [to_cpu(k) for k in module.kernels]
    return build_library(kernels, module.globals, block_shapes=_block_shapes(s, kernels), source=str(s.source))


@functools.lru_cache(maxsize=None)
def _cpp_float64_library() -> CLibrary:
    kernels, globals_, shapes = [], [], {}
    for s in SAMPLES:
        if s.real:
            module = _module(s.name, "double")
            cpu = [to_cpu(k) for k in module.kernels]
            kernels += cpu
            globals_ += [g for g in module.globals if g.name not in {x.name for x in globals_}]
            shapes.update(_block_shapes(s, cpu))
    return build_library(kernels, globals_, block_shapes=shapes, cpp=True, check_bounds=True,
                         source="samples (REAL=double)")


def _cases(only_real: bool = False):
    for s in SAMPLES:
        if only_real and not s.real:
            continue
        for i, case in enumerate(s.cases):
            yield pytest.param(s, i, id=f"{s.name}-{case}")


def _check(s: Sample, case_index: int, real: type, library: CLibrary) -> None:
    case = s.cases[case_index]
    module = _module(s.name, "double" if real is np.float64 else "float")
    args = s.make_args(np.random.default_rng(1234 + case_index), case, real)
    expected = s.reference(copy_args(args), case)
    emulated = copy_args(args)
    emulate(module.kernel(s.kernel), case.grid, case.block, emulated, shmem=case.shmem)
    compiled = copy_args(args)
    library.launch(s.kernel, case.grid, case.block, compiled, shmem=case.shmem)
    tol = dict(rtol=s.rtol, atol=s.atol) if real is np.float32 else dict(rtol=1e-9, atol=1e-9)
    for out in s.outputs:
        got = np.asarray(compiled[out], dtype=np.float64)
        np.testing.assert_allclose(got, np.asarray(expected[out], dtype=np.float64),
                                   err_msg=f"{s.name} {case} output {out}: C backend vs NumPy reference", **tol)
        np.testing.assert_allclose(got, np.asarray(emulated[out], dtype=np.float64),
                                   err_msg=f"{s.name} {case} output {out}: C backend vs emulator", **tol)


@pytest.mark.parametrize("s,case_index", list(_cases()))
def test_sample_in_c(s: Sample, case_index: int) -> None:
    need_compiler()
    _check(s, case_index, np.float32, _c_library(s.name))


@pytest.mark.parametrize("s,case_index", list(_cases(only_real=True)))
def test_sample_in_cpp_float64_with_bounds_checks(s: Sample, case_index: int) -> None:
    need_compiler(cpp=True)
    _check(s, case_index, np.float64, _cpp_float64_library())


def test_every_sample_has_two_launch_shapes() -> None:
    for s in SAMPLES:
        assert len(s.cases) >= 2, s.name
