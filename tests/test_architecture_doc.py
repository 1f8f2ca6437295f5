"""docs/architecture.md lists the pipelines as the code runs them, and names only registered passes."""
from __future__ import annotations

import pathlib
import re

from polypy.driver import pipelines
from polypy.passes.specialize import SPECIALIZE_CLEANUP

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _listed() -> dict[str, tuple[str, ...]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## The pipeline, as one list", 1)[1].split("## ", 1)[0]
    block = section.split("```", 2)[1]
    out = {}
    for line in block.strip().splitlines():
        name, *passes = line.split()
        out[name] = tuple(passes)
    return out


def test_the_documented_pipelines_are_the_code_s_lists():
    listed = _listed()
    assert set(listed) == {"GPU_PASSES", "CPU_CHECK", "CPU_OPTIMIZE", "CPU_LOWERING", "CPU_SCHEDULE", "CPU_FINISH"}
    for name, passes in listed.items():
        assert passes == getattr(pipelines, name), name


def test_every_pass_the_document_names_is_registered():
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`([a-z]+(?:-[a-z0-9]+)+)`", text)) - {"no-opt", "dump-after"}
    assert named, "the document names no pass"
    assert named <= set(pipelines.PASSES), sorted(named - set(pipelines.PASSES))
    assert {step.name for step in SPECIALIZE_CLEANUP} <= named
