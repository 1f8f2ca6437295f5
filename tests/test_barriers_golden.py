"""Golden tests of the barrier and shared-memory passes, re-run in the emulator.

Each file in ``tests/golden/barriers/`` holds an input kernel (IR text, run through
``SIMPLIFY`` first, as the frontend does), a launch, and one section per pipeline (passes of the
driver's registry joined with ``+``, see ``golden_files``) with the expected IR text; ``report``
sections hold the expected ``eliminate-barriers`` report of the pipeline named after
``report:``::

    === launch
    grid=2 block=64 n=100 size=128
    === input
    kernel ...
    === eliminate-barriers
    kernel ...
    === report: eliminate-barriers
    own_slot.ir:7:3: barrier removed: ...

Every transformed kernel is also run in the emulator against the input on the same random
arguments: the outputs must be identical and the emulator's race detector must stay silent
(no new race). ``POLYPY_UPDATE_GOLDEN=1`` rewrites the expected sections.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

from golden_files import (cases, check, format_report, launches, make_args, parse_input, pipeline_sections,
                          read_sections, report_pipeline, run_passes)
from polypy.driver import pipelines
from polypy.emulator import emulate
from polypy.ir import print_kernel
from polypy.passes import run_pipeline

GOLDEN = pathlib.Path(__file__).parent / "golden" / "barriers"
FILES = sorted(GOLDEN.glob("*.ir"))
# The passes these files test (every pipeline section uses at least one of them).
TESTED = {"eliminate-barriers", "forward-shared-stores", "eliminate-dead-shared-stores"}


def input_kernel(path: pathlib.Path, sections: list[tuple[str, str]]):
    return run_pipeline(parse_input(path, sections), pipelines.passes(pipelines.SIMPLIFY))


def outputs(kernel, spec: dict, seed: int) -> dict:
    args = make_args(kernel, spec, seed, int_high=spec.get("size", 1024))
    emulate(kernel, spec["grid"], spec["block"], args, shmem=spec.get("shmem", 0), check_races=True)
    return {k: v for k, v in args.items() if isinstance(v, np.ndarray)}


@pytest.mark.parametrize("path,passes", cases(FILES, "passes"))
def test_golden_ir(path: pathlib.Path, passes: str) -> None:
    header, sections = read_sections(path)
    check(path, header, sections, passes, print_kernel(run_passes(input_kernel(path, sections), passes)))


@pytest.mark.parametrize("path,section", cases(FILES, "report"))
def test_golden_report(path: pathlib.Path, section: str) -> None:
    header, sections = read_sections(path)
    report: list = []
    run_passes(input_kernel(path, sections), report_pipeline(section), report)
    check(path, header, sections, section, format_report(report))


@pytest.mark.parametrize("path,passes", cases(FILES, "passes"))
def test_emulator_agrees(path: pathlib.Path, passes: str) -> None:
    """The transformed kernel computes exactly what the input computes, without races."""
    _, sections = read_sections(path)
    [spec] = launches(sections)
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
        found = pipeline_sections(sections)
        assert found, path.name
        for name in found:
            assert {p.name for p in pipelines.parse_pipeline(name)} & TESTED, f"{path.name}: {name}"
