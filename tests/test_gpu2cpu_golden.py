"""Golden tests of the GPU -> CPU lowering passes, re-run through the C backend.

Each file in ``tests/golden/gpu2cpu/`` holds an input kernel (IR text, run through
``GPU_PIPELINE`` first, as ``polypy.load`` does), a launch, and one section per pipeline (passes
of the driver's registry joined with ``+``, see ``golden_files``) with the expected IR text;
``report`` sections hold the expected decisions of the pipeline named after ``report:``::

    === launch
    grid=2 block=64 n=100 size=256
    === input
    kernel ...
    === serialize-threads
    kernel ... stage cpu
    === report: serialize-threads
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

from polypy.driver.library import build_library
from golden_files import (cases, check, format_report, launches, make_args, parse_input, pipeline_sections,
                          read_sections, report_pipeline, run_passes)
from polypy.driver.pipelines import GPU_PIPELINE, make_pass, parse_pipeline
from polypy.emulator import emulate
from polypy.ir import print_kernel
from polypy.passes import run_pipeline

GOLDEN = pathlib.Path(__file__).parent / "golden" / "gpu2cpu"
FILES = sorted(GOLDEN.glob("*.ir"))


def input_kernel(path: pathlib.Path, sections: list[tuple[str, str]]):
    return run_pipeline(parse_input(path, sections), GPU_PIPELINE)


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


@pytest.mark.parametrize("path,passes", [p for p in cases(FILES, "passes") if "serialize" in p.values[1]])
def test_c_backend_agrees_with_emulator(path: pathlib.Path, passes: str) -> None:
    need_compiler()
    _, sections = read_sections(path)
    [spec] = launches(sections)
    before = input_kernel(path, sections)
    after = run_passes(before, passes)
    if "lower-block-atomics" not in passes:
        after = make_pass("lower-block-atomics").run(after)
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
        pipelines = [[p.name for p in parse_pipeline(name)] for name in pipeline_sections(sections)]
        assert any(ps[0] == "serialize-threads" for ps in pipelines), path.name
