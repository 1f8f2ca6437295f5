"""Golden tests of the CPU schedule passes (``gpu2cpu.fuse_thread_loops``,
``gpu2cpu.tighten_thread_bounds``, ``gpu2cpu.sink_thread_loops``), re-run through the C backend.

Each file in ``tests/golden/schedule/`` holds an input kernel in GPU form (run through
``GPU_PIPELINE`` and lowered with ``serialize_threads``, as ``to_cpu`` does), one or more launch
lines, and one section per pass sequence (pass names joined with ``+``, applied after the
lowering) with the expected CPU-form IR text; ``report: ...`` sections hold the decisions::

    === launch
    grid=2 block=64 n=100 size=256
    grid=3 block=32 n=-5
    === input
    kernel ...
    === tighten_thread_bounds
    kernel ... stage cpu
    === report: tighten_thread_bounds+sink_thread_loops
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

from codegen.c import build_library
from gpu2cpu.fuse_thread_loops import fuse_thread_loops
from gpu2cpu.lower_block_atomics import lower_block_atomics
from gpu2cpu.serialize_threads import serialize_threads
from gpu2cpu.sink_thread_loops import sink_thread_loops
from gpu2cpu.tighten_thread_bounds import tighten_thread_bounds
from polypy.driver.api import CompiledModule
from polypy.driver.pipelines import GPU_PIPELINE
from golden_files import UPDATE, parse_input, read_sections, write_sections
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir import print_kernel, verify_kernel
from polypy.ir.types import PointerType
from polypy.passes import eliminate_dead_code, fold_constants, run_pipeline

GOLDEN = pathlib.Path(__file__).parent / "golden" / "schedule"
FILES = sorted(GOLDEN.glob("*.ir"))

PASSES = {
    "fuse_thread_loops": fuse_thread_loops,
    "tighten_thread_bounds": tighten_thread_bounds,
    "sink_thread_loops": sink_thread_loops,
    "fold_constants": lambda k, report=None: fold_constants(k),
    "eliminate_dead_code": lambda k, report=None: eliminate_dead_code(k),
}






def input_kernel(path: pathlib.Path, sections: list[tuple[str, str]]):
    return run_pipeline(parse_input(path, sections), GPU_PIPELINE)


def run_passes(gpu, names: str, report: list | None = None):
    kernel = serialize_threads(gpu)
    for name in names.split("+"):
        kernel = PASSES[name](kernel, report=report)
        verify_kernel(kernel)
    return kernel


def launches(sections: list[tuple[str, str]]) -> list[dict]:
    out = []
    for line in dict(sections)["launch"].splitlines():
        spec: dict = {}
        for item in line.split():
            key, value = item.split("=")
            spec[key] = tuple(int(v) for v in value.split(",")) if key in ("grid", "block") else int(value)
        out.append(spec)
    return out


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


def _last_section(path: pathlib.Path) -> str:
    _, sections = read_sections(path)
    return [name for name, _ in sections if name not in ("input", "launch") and not name.startswith("report")][-1]


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


@pytest.mark.parametrize("path,passes", _sections_of("passes"))
def test_c_backend_agrees_with_emulator(path: pathlib.Path, passes: str) -> None:
    """The scheduled kernel, compiled, computes exactly what the emulator computes on the input."""
    need_compiler()
    _, sections = read_sections(path)
    before = input_kernel(path, sections)
    after = lower_block_atomics(run_passes(before, passes))
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


@pytest.mark.parametrize("path,passes", [p for p in _sections_of("passes")
                                         if p.values[1] == _last_section(p.values[0])])
def test_llvm_backend_agrees_with_emulator(path: pathlib.Path, passes: str) -> None:
    """The last schedule of each file, through the LLVM JIT (generic and block-specialized)."""
    _, sections = read_sections(path)
    before = input_kernel(path, sections)
    after = lower_block_atomics(run_passes(before, passes))
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
        assert any(n in PASSES or "+" in n for n in names), path.name
