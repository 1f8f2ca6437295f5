"""Golden tests of the CPU schedule passes (``gpu2cpu.fuse_thread_loops``,
``gpu2cpu.tighten_thread_bounds``, ``gpu2cpu.sink_thread_loops``, and their steps run alone:
``distribute_thread_loops``, ``version_thread_loops``, ``normalize_grid_stride``), re-run
through the C backend.

Each file in ``tests/golden/schedule/`` holds an input kernel in GPU form (run through
``GPU_PIPELINE`` and lowered with ``serialize-threads``, as ``to_cpu`` does), one or more launch
lines, and one section per pass sequence (passes of the driver's registry joined with ``+``, see
``golden_files``, applied after the lowering) with the expected CPU-form IR text; ``report: ...``
sections hold the decisions of the sequence (not of the lowering)::

    === launch
    grid=2 block=64 n=100 size=256
    grid=3 block=32 n=-5
    === input
    kernel ...
    === tighten-thread-bounds
    kernel ... stage cpu
    === report: tighten-thread-bounds+sink-thread-loops
    ...

Every result is compiled with the C backend and run against the emulator on the input, on
every launch, with random arguments: the outputs must be identical (skipped without a C
compiler). ``POLYPY_UPDATE_GOLDEN=1`` rewrites the expected sections.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from c_support import need_compiler

from polypy.driver.library import build_library
from golden_files import (cases, check, format_report, launches, make_args, parse_input, pipeline_sections,
                          read_sections, report_pipeline)
from golden_files import run_passes as run_named
from polypy.driver.api import CompiledModule
from polypy.driver.pipelines import GPU_PIPELINE, make_pass, parse_pipeline
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir import print_kernel
from polypy.passes import run_pipeline

GOLDEN = pathlib.Path(__file__).parent / "golden" / "schedule"
FILES = sorted(GOLDEN.glob("*.ir"))
# The passes these files test (every pipeline section uses at least one of them).
TESTED = {"fuse-thread-loops", "tighten-thread-bounds", "sink-thread-loops",
          "distribute-thread-loops", "version-thread-loops", "normalize-grid-stride"}


def input_kernel(path: pathlib.Path, sections: list[tuple[str, str]]):
    return run_pipeline(parse_input(path, sections), GPU_PIPELINE)


def run_passes(gpu, names: str, report: list | None = None):
    """The lowering (``serialize-threads``, its decisions not reported), then ``names``."""
    return run_named(run_named(gpu, "serialize-threads"), names, report)


def _last_section(path: pathlib.Path) -> str:
    _, sections = read_sections(path)
    return pipeline_sections(sections)[-1]


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
def test_c_backend_agrees_with_emulator(path: pathlib.Path, passes: str) -> None:
    need_compiler()
    _, sections = read_sections(path)
    before = input_kernel(path, sections)
    after = make_pass("lower-block-atomics").run(run_passes(before, passes))
    lib = build_library([after])
    for spec in launches(sections):
        for seed in (0, 1):
            expected = make_args(before, spec, seed)
            emulate(before, spec["grid"], spec["block"], expected, shmem=spec.get("shmem", 0))
            got = make_args(before, spec, seed)
            lib.launch(after.name, spec["grid"], spec["block"], got, shmem=spec.get("shmem", 0))
            for name, value in expected.items():
                if isinstance(value, np.ndarray):
                    np.testing.assert_array_equal(got[name], value, err_msg=f"buffer {name}, launch {spec}")


@pytest.mark.parametrize("path,passes", [p for p in cases(FILES, "passes")
                                         if p.values[1] == _last_section(p.values[0])])
def test_llvm_backend_agrees_with_emulator(path: pathlib.Path, passes: str) -> None:
    _, sections = read_sections(path)
    before = input_kernel(path, sections)
    after = make_pass("lower-block-atomics").run(run_passes(before, passes))
    module = CompiledModule.from_ir(n.Module((before,)), n.Module((after,)), threads=2)
    for spec in launches(sections):
        expected = make_args(before, spec, 0)
        emulate(before, spec["grid"], spec["block"], expected, shmem=spec.get("shmem", 0))
        got = make_args(before, spec, 0)
        module[after.name][spec["grid"], spec["block"], spec.get("shmem", 0)](**got)
        for name, value in expected.items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(got[name], value, err_msg=f"buffer {name}, launch {spec}")


def test_every_golden_file_has_a_launch_and_a_schedule() -> None:
    assert len(FILES) >= 8
    for path in FILES:
        _, sections = read_sections(path)
        names = [n for n, _ in sections]
        assert "input" in names and "launch" in names, path.name
        pipelines = pipeline_sections(sections)
        assert pipelines, path.name
        for name in pipelines:
            assert {p.name for p in parse_pipeline(name)} & TESTED, f"{path.name}: {name}"
