"""Golden tests of the GPU -> CPU lowering passes, re-run through the C backend.

Each file in ``tests/golden/gpu2cpu/`` holds an input kernel (IR text, run through
``GPU_PIPELINE`` first, as ``polypy.load`` does), a launch, and one section per pass or pipeline
(pass names joined with ``+``) with the expected IR text; ``report`` sections hold the expected
decisions of the pipeline named after ``report:``::

    === launch
    grid=2 block=64 n=100 size=256
    === input
    kernel ...
    === serialize_threads
    kernel ... stage cpu
    === report: serialize_threads
    ...

Every lowered kernel is also compiled with the C backend and run against the emulator on the
input, on the same random arguments: the outputs must be identical (skipped without a C
compiler). ``POLYPY_UPDATE_GOLDEN=1`` rewrites the expected sections.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

from c_support import need_compiler
from codegen.c import build_library
from gpu2cpu.lower_block_atomics import lower_block_atomics
from gpu2cpu.serialize_threads import serialize_threads
from polypy.driver.pipelines import GPU_PIPELINE
from golden_files import UPDATE, parse_input, read_sections, write_sections
from polypy.emulator import emulate
from polypy.ir import print_kernel, verify_kernel
from polypy.ir.types import PointerType
from polypy.passes import eliminate_dead_code, fold_constants, run_pipeline

GOLDEN = pathlib.Path(__file__).parent / "golden" / "gpu2cpu"
FILES = sorted(GOLDEN.glob("*.ir"))

PASSES = {
    "serialize_threads": serialize_threads,
    "serialize_threads_no_recompute": lambda k, report=None: serialize_threads(k, recompute=False, report=report),
    "lower_block_atomics": lower_block_atomics,
    "fold_constants": fold_constants,
    "eliminate_dead_code": eliminate_dead_code,
}






def input_kernel(path: pathlib.Path, sections: list[tuple[str, str]]):
    return run_pipeline(parse_input(path, sections), GPU_PIPELINE)


def run_passes(kernel, names: str, report: list | None = None):
    for name in names.split("+"):
        fn = PASSES[name]
        kernel = fn(kernel, report=report) if name.startswith("serialize_threads") else fn(kernel)
        verify_kernel(kernel)
    return kernel


def parse_launch(text: str) -> dict:
    spec: dict = {}
    for item in text.split():
        key, value = item.split("=")
        spec[key] = tuple(int(v) for v in value.split(",")) if key in ("grid", "block") else int(value)
    return spec


def make_args(kernel, spec: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    size = spec.get("size", 1024)
    args = {}
    for p in kernel.params:
        if isinstance(p.ptype, PointerType):
            dtype = p.ptype.elem.dtype
            if p.ptype.elem.is_float:
                args[p.name] = rng.integers(-8, 8, size).astype(dtype)  # exact sums in any order
            else:
                args[p.name] = rng.integers(0, 64, size).astype(dtype)
        else:
            args[p.name] = spec.get(p.name, 3)
    return args


def _sections_of(kind: str) -> list:
    cases = []
    for path in FILES:
        _, sections = read_sections(path)
        for name, _ in sections:
            if kind == "passes" and name not in ("input", "launch") and not name.startswith("report"):
                cases.append(pytest.param(path, name, id=f"{path.stem}-{name}"))
            if kind == "report" and name.startswith("report:"):
                cases.append(pytest.param(path, name, id=f"{path.stem}-{name.split(':', 1)[1].strip()}"))
    return cases


@pytest.mark.parametrize("path,passes", _sections_of("passes"))
def test_golden_ir(path: pathlib.Path, passes: str) -> None:
    header, sections = read_sections(path)
    result = print_kernel(run_passes(input_kernel(path, sections), passes))
    expected = dict(sections)[passes]
    if UPDATE and result != expected:
        write_sections(path, header, [(n, result if n == passes else t) for n, t in sections])
        return
    assert result == expected


@pytest.mark.parametrize("path,section", _sections_of("report"))
def test_golden_report(path: pathlib.Path, section: str) -> None:
    header, sections = read_sections(path)
    report: list = []
    run_passes(input_kernel(path, sections), section.split(":", 1)[1].strip(), report)
    result = "\n".join(d.format() for d in report) + "\n"
    expected = dict(sections)[section]
    if UPDATE and result != expected:
        write_sections(path, header, [(n, result if n == section else t) for n, t in sections])
        return
    assert result == expected


@pytest.mark.parametrize("path,passes", [p for p in _sections_of("passes") if "serialize" in p.values[1]])
def test_c_backend_agrees_with_emulator(path: pathlib.Path, passes: str) -> None:
    """The lowered kernel, compiled, computes exactly what the emulator computes on the input."""
    need_compiler()
    _, sections = read_sections(path)
    spec = parse_launch(dict(sections)["launch"])
    before = input_kernel(path, sections)
    after = run_passes(before, passes)
    if "lower_block_atomics" not in passes:
        after = lower_block_atomics(after)
    lib = build_library([after])
    for seed in (0, 1):
        expected = make_args(before, spec, seed)
        emulate(before, spec["grid"], spec["block"], expected, shmem=spec.get("shmem", 0))
        got = make_args(before, spec, seed)
        lib.launch(after.name, spec["grid"], spec["block"], got, shmem=spec.get("shmem", 0))
        for name, value in expected.items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(got[name], value, err_msg=f"buffer {name}")


def test_every_golden_file_has_a_launch_and_a_lowering() -> None:
    assert len(FILES) >= 12
    for path in FILES:
        _, sections = read_sections(path)
        names = [n for n, _ in sections]
        assert "input" in names and "launch" in names, path.name
        assert any(n.startswith("serialize_threads") for n in names), path.name
