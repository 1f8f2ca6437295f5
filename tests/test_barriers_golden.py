"""Golden tests of the barrier and shared-memory passes, re-run in the emulator.

Each file in ``tests/golden/barriers/`` holds an input kernel (IR text, run through
``SIMPLIFY`` first, as the frontend does), a launch, and one section per pass or pipeline
(pass names joined with ``+``) with the expected IR text; ``report`` sections hold the
expected ``eliminate_barriers`` report of the pipeline named after ``report:``::

    === launch
    grid=2 block=64 n=100 size=128
    === input
    kernel ...
    === eliminate_barriers
    kernel ...
    === report: eliminate_barriers
    own_slot.ir:7:3: barrier removed: ...

Every transformed kernel is also run in the emulator against the input on the same random
arguments: the outputs must be identical and the emulator's race detector must stay silent
(no new race). ``POLYPY_UPDATE_GOLDEN=1`` rewrites the expected sections.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

from gpu2cpu.barriers import eliminate_barriers
from gpu2cpu.forward_shared import eliminate_dead_shared_stores, forward_shared_stores
from golden_files import UPDATE, parse_input, read_sections, write_sections
from polypy.emulator import emulate
from polypy.ir import print_kernel, verify_kernel
from polypy.ir.types import PointerType
from polypy.passes import SIMPLIFY, run_pipeline

GOLDEN = pathlib.Path(__file__).parent / "golden" / "barriers"
FILES = sorted(GOLDEN.glob("*.ir"))

PASSES = {
    "eliminate_barriers": eliminate_barriers,
    "forward_shared_stores": forward_shared_stores,
    "eliminate_dead_shared_stores": eliminate_dead_shared_stores,
}






def input_kernel(path: pathlib.Path, sections: list[tuple[str, str]]):
    return run_pipeline(parse_input(path, sections), SIMPLIFY)


def run_passes(kernel, names: str, report: list | None = None):
    for name in names.split("+"):
        if name == "eliminate_barriers":
            kernel = eliminate_barriers(kernel, report=report)
        else:
            kernel = PASSES[name](kernel)
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
                args[p.name] = rng.integers(0, size, size).astype(dtype)
        else:
            args[p.name] = spec.get(p.name, 3)
    return args


def outputs(kernel, spec: dict, seed: int) -> dict:
    args = make_args(kernel, spec, seed)
    emulate(kernel, spec["grid"], spec["block"], args, shmem=spec.get("shmem", 0), check_races=True)
    return {k: v for k, v in args.items() if isinstance(v, np.ndarray)}


def golden_cases() -> list:
    cases = []
    for path in FILES:
        _, sections = read_sections(path)
        for name, _ in sections:
            if name not in ("input", "launch") and not name.startswith("report"):
                cases.append(pytest.param(path, name, id=f"{path.stem}-{name}"))
    return cases


@pytest.mark.parametrize("path,passes", golden_cases())
def test_golden_ir(path: pathlib.Path, passes: str) -> None:
    header, sections = read_sections(path)
    result = print_kernel(run_passes(input_kernel(path, sections), passes))
    expected = dict(sections)[passes]
    if UPDATE and result != expected:
        write_sections(path, header, [(n, result if n == passes else t) for n, t in sections])
        return
    assert result == expected


def report_cases() -> list:
    cases = []
    for path in FILES:
        _, sections = read_sections(path)
        for name, _ in sections:
            if name.startswith("report:"):
                cases.append(pytest.param(path, name, id=f"{path.stem}-{name.split(':', 1)[1].strip()}"))
    return cases


@pytest.mark.parametrize("path,section", report_cases())
def test_golden_report(path: pathlib.Path, section: str) -> None:
    header, sections = read_sections(path)
    report: list = []
    passes = section.split(":", 1)[1].strip()
    run_passes(input_kernel(path, sections), passes, report)
    result = "\n".join(d.format() for d in report) + "\n"
    expected = dict(sections)[section]
    if UPDATE and result != expected:
        write_sections(path, header, [(n, result if n == section else t) for n, t in sections])
        return
    assert result == expected


@pytest.mark.parametrize("path,passes", golden_cases())
def test_emulator_agrees(path: pathlib.Path, passes: str) -> None:
    """The transformed kernel computes exactly what the input computes, without races."""
    _, sections = read_sections(path)
    spec = parse_launch(dict(sections)["launch"])
    before = input_kernel(path, sections)
    after = run_passes(before, passes)
    for seed in (0, 1):
        expected = outputs(before, spec, seed)
        got = outputs(after, spec, seed)
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=f"buffer {name}")


def test_every_golden_file_has_a_launch_and_a_pass() -> None:
    assert len(FILES) >= 12
    for path in FILES:
        _, sections = read_sections(path)
        names = [n for n, _ in sections]
        assert "input" in names and "launch" in names, path.name
        assert any(n in PASSES or "+" in n for n in names), path.name
