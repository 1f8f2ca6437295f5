"""The golden-file harness shared by the pass tests: IR text in, named passes, IR text out.

A golden file is a header comment, then sections ``=== name`` followed by their text: ``input``
(IR text), ``launch`` (one launch per line: ``grid=2 block=64 n=100 size=256``), the expected
output per pipeline and the expected reports. A pipeline section is named by passes of the
driver's registry (``polypy.driver.pipelines``) joined with ``+``, options in braces
(``serialize-threads{recompute=false}+lower-block-atomics``); ``report: <pipeline>`` holds the
decisions that pipeline reports, one ``format()`` per line. ``POLYPY_UPDATE_GOLDEN=1`` makes the
tests rewrite the expected sections instead of comparing (check the diff before committing).
"""
from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

from polypy.driver.pipelines import parse_pipeline
from polypy.ir import nodes as n
from polypy.ir import parse_kernel
from polypy.ir.types import PointerType
from polypy.passes import run_pipeline

UPDATE = os.environ.get("POLYPY_UPDATE_GOLDEN") == "1"
NOT_PIPELINES = ("input", "launch")


def read_sections(path: pathlib.Path) -> tuple[str, list[tuple[str, str]]]:
    """The header comment and the ``(name, text)`` sections of a golden file."""
    header: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in path.read_text().splitlines():
        if line.startswith("=== "):
            sections.append((line[4:].strip(), []))
        elif sections:
            sections[-1][1].append(line)
        else:
            header.append(line)
    return "\n".join(header), [(name, "\n".join(lines).strip("\n") + "\n") for name, lines in sections]


def write_sections(path: pathlib.Path, header: str, sections: list[tuple[str, str]]) -> None:
    text = header.rstrip("\n") + "\n" if header.strip() else ""
    for name, body in sections:
        text += f"=== {name}\n{body.rstrip()}\n"
    path.write_text(text)


def parse_input(path: pathlib.Path, sections: list[tuple[str, str]]) -> n.Kernel:
    """The ``input`` section as a kernel whose locations point into the golden file."""
    text = dict(sections)["input"]
    lines = path.read_text().splitlines()
    first = lines.index("=== input") + 1  # the section starts after its marker line
    return parse_kernel("\n" * first + text, filename=path.name)


def pipeline_sections(sections: list[tuple[str, str]]) -> list[str]:
    """The names of the sections that hold the output of a pipeline, in file order."""
    return [name for name, _ in sections if name not in NOT_PIPELINES and not name.startswith("report")]


def cases(files: list[pathlib.Path], kind: str) -> list:
    """pytest parameters ``(path, section)``: ``kind`` "passes" for the pipeline sections,
    "report" for the ``report: ...`` sections."""
    out = []
    for path in files:
        _, sections = read_sections(path)
        if kind == "passes":
            out += [pytest.param(path, name, id=f"{path.stem}-{name}") for name in pipeline_sections(sections)]
        else:
            out += [pytest.param(path, name, id=f"{path.stem}-{name.split(':', 1)[1].strip()}")
                    for name, _ in sections if name.startswith("report:")]
    return out


def run_passes(kernel: n.Kernel, spec: str, report: list | None = None) -> n.Kernel:
    """``kernel`` through the registered passes ``spec`` names, verified after each."""
    return run_pipeline(kernel, parse_pipeline(spec, report=report))


def report_pipeline(section: str) -> str:
    """The pipeline a ``report: <pipeline>`` section is about."""
    return section.split(":", 1)[1].strip()


def format_report(report: list) -> str:
    return "\n".join(d.format() for d in report) + "\n"


def check(path: pathlib.Path, header: str, sections: list[tuple[str, str]], name: str, result: str) -> None:
    """``result`` must be the text of section ``name`` (rewritten instead under ``UPDATE``)."""
    expected = dict(sections)[name]
    if UPDATE and result != expected:
        write_sections(path, header, [(s, result if s == name else t) for s, t in sections])
        return
    assert result == expected


def check_all(path: pathlib.Path, header: str, sections: list[tuple[str, str]], got: dict[str, str]) -> None:
    """Each text of ``got`` must be its section's (under ``UPDATE``, every differing or missing
    section is rewritten, in one write)."""
    if UPDATE:
        present = dict(sections)
        merged = [(name, got.get(name, text)) for name, text in sections]
        merged += [(name, text) for name, text in got.items() if name not in present]
        if merged != sections:
            write_sections(path, header, merged)
        return
    expected = dict(sections)
    for name, text in got.items():
        assert text == expected.get(name), f"{path.name}: section {name} differs:\n{text}"


def launches(sections: list[tuple[str, str]]) -> list[dict]:
    """The ``launch`` section: one dict per line (grid and block as tuples, the rest ints)."""
    out = []
    for line in dict(sections)["launch"].splitlines():
        spec: dict = {}
        for item in line.split():
            key, value = item.split("=")
            spec[key] = tuple(int(v) for v in value.split(",")) if key in ("grid", "block") else int(value)
        out.append(spec)
    return out


def make_args(kernel: n.Kernel, spec: dict, seed: int, *, int_high: int | None = None) -> dict:
    """Random arguments for a launch: ``size`` elements per array (floats: small integers, so
    sums are exact in any order; ints in ``[0, int_high)``, default 64), scalars from ``spec``
    (3 where it has none)."""
    rng = np.random.default_rng(seed)
    size = spec.get("size", 1024)
    args = {}
    for p in kernel.params:
        if isinstance(p.ptype, PointerType):
            dtype = p.ptype.elem.dtype
            if p.ptype.elem.is_float:
                args[p.name] = rng.integers(-8, 8, size).astype(dtype)  # exact sums in any order
            else:
                args[p.name] = rng.integers(0, int_high or 64, size).astype(dtype)
        else:
            args[p.name] = spec.get(p.name, 3)
    return args
