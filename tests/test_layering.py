"""The stages never import one another; only the driver in ``polypy/`` wires them together.

Read with ``ast`` (nothing is imported): ``frontend``, ``gpu2cpu``, ``autodiff`` and ``codegen`` may
import ``polypy`` but not each other; only ``frontend`` imports ``clang``; only ``codegen`` imports
``llvmlite`` and ``jinja2``; only ``polypy/poly`` imports ``islpy``; the core (``polypy/``) imports
stages only inside functions.
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
STAGES = ("frontend", "gpu2cpu", "autodiff", "codegen")


def _imports(path: pathlib.Path, *, top_level_only: bool = False):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def _files(package: str):
    return sorted((ROOT / package).rglob("*.py"))


def test_stages_do_not_import_each_other():
    bad = []
    for stage in STAGES:
        for path in _files(stage):
            for line, name in _imports(path):
                head = name.split(".")[0]
                if head in STAGES and head != stage:
                    bad.append(f"{path.relative_to(ROOT)}:{line}: imports {name}")
    assert not bad, "\n".join(bad)


def test_third_party_libraries_stay_in_their_stage():
    owners = {"clang": ("frontend",), "llvmlite": ("codegen",), "jinja2": ("codegen",), "islpy": ("polypy/poly",)}
    bad = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("tests/", "bench/", "samples/", ".ci-venv/", "build/")):
            continue
        for line, name in _imports(path):
            head = name.split(".")[0]
            if head in owners and not any(rel.startswith(o + "/") for o in owners[head]):
                bad.append(f"{rel}:{line}: imports {name}")
    assert not bad, "\n".join(bad)


def test_core_imports_stages_only_inside_functions():
    bad = []
    for path in _files("polypy"):
        for line, name in _imports(path, top_level_only=True):
            if name.split(".")[0] in STAGES:
                bad.append(f"{path.relative_to(ROOT)}:{line}: top-level import of {name}")
    assert not bad, "\n".join(bad)
