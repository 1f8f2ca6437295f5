"""tests/extended_tier.txt names what exists: a file of tests/, or a test function defined in it.

A stale entry would name nothing (a renamed test silently back in the default tier is harmless;
an entry that names nothing hides that the list no longer says what CI's log measured)."""
from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

from conftest import ROOT, extended_entries


def _functions(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_entry_names_a_test_file_or_a_test_function_in_it():
    entries = extended_entries()
    assert entries
    for entry in sorted(entries):
        path, _, function = entry.partition("::")
        file = ROOT / path
        assert file.is_file() and file.name.startswith("test_"), entry
        if function:
            assert function in _functions(file), entry


def _outcome(directory: pathlib.Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}  # the outer run's options are not ours
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", *args],
                         cwd=directory, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout.strip().splitlines()[-1]


def test_the_tiers_split_a_file_by_its_functions(tmp_path):
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    (tmp_path / "conftest.py").write_text(conftest.replace(
        'ROOT / "tests" / "extended_tier.txt"', 'pathlib.Path(__file__).parent / "tiers.txt"'))
    (tmp_path / "tiers.txt").write_text("test_a.py::test_long  # a comment\ntest_b.py\n")
    (tmp_path / "test_a.py").write_text("def test_long():\n    pass\n\n\ndef test_short():\n    pass\n")
    (tmp_path / "test_b.py").write_text("import pytest\n\n\n@pytest.mark.parametrize('x', [1, 2])\n"
                                        "def test_b(x):\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = .\n")
    assert _outcome(tmp_path).startswith("1 passed, 3 deselected")
    assert _outcome(tmp_path, "--tier", "extended").startswith("3 passed, 1 deselected")
    assert _outcome(tmp_path, "--tier", "all").startswith("4 passed")
    assert _outcome(tmp_path, "test_b.py").startswith("2 passed")  # a named path runs what it names
