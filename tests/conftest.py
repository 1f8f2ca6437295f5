"""Shared pytest configuration: the repository root is importable (for ``samples``)."""
from __future__ import annotations

import os
import pathlib
import shutil
import sys
import tempfile
from collections import defaultdict

from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Tests write nothing outside temporary directories: not into the checkout, not into the user's
# cache. One temporary directory of this session holds hypothesis's files (without an example
# database) and polypy's compiled-code cache (also for subprocesses, through the environment);
# pytest's own cache is off (addopts in pyproject.toml).
_SESSION_DIR = tempfile.mkdtemp(prefix="polypy-tests-")
set_hypothesis_home_dir(os.path.join(_SESSION_DIR, "hypothesis"))
settings.register_profile("polypy", database=None)
settings.load_profile("polypy")
os.environ.setdefault("POLYPY_CACHE_DIR", os.path.join(_SESSION_DIR, "cache"))


def pytest_unconfigure(config) -> None:
    shutil.rmtree(_SESSION_DIR, ignore_errors=True)


def pytest_addoption(parser) -> None:
    parser.addoption("--tier", choices=("default", "extended", "all"), default=None,
                     help="which tier of the suite to run (tests/extended_tier.txt lists the extended "
                          "tier): 'default' (the default when no test path is named), 'extended' (CI "
                          "runs it after the default tier), 'all' (the default when paths are named)")
    parser.addoption("--random-kernels", type=int, default=None, metavar="N",
                     help="tests/test_random_kernels.py: run seeds 0..N-1 (default: its DEFAULT_KERNELS; "
                          "also POLYPY_RANDOM_KERNELS=N)")


# The suite's two tiers. The default tier (README's test command) stays well under 15 minutes on
# CI's 2 cores; the extended tier is the long end-to-end and exhaustive tests, listed by file or
# by test function in tests/extended_tier.txt. CI runs both (.ci/run); naming a test path on the
# command line runs what it names, whichever tier it is in. Deselected tests are reported as such.
EXTENDED_LIST = ROOT / "tests" / "extended_tier.txt"


def extended_entries() -> set[str]:
    """The entries of tests/extended_tier.txt: ``tests/test_x.py`` or ``tests/test_x.py::test_f``."""
    out = set()
    for line in EXTENDED_LIST.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.add(line)
    return out


def _in_extended(item, entries: set[str]) -> bool:
    path = item.nodeid.split("::", 1)[0]
    function = getattr(item, "originalname", None) or item.name.split("[", 1)[0]
    return path in entries or f"{path}::{function}" in entries


def pytest_collection_modifyitems(config, items) -> None:
    tier = config.getoption("--tier")
    if tier is None:
        from _pytest.config import Config
        tier = "all" if config.args_source == Config.ArgsSource.ARGS else "default"
    if tier == "all":
        return
    entries = extended_entries()
    keep, drop = [], []
    for item in items:
        (keep if _in_extended(item, entries) == (tier == "extended") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# Where the suite's time goes: the seconds of each test file (setup, call and teardown of its
# tests, summed over the workers), the slowest files printed at the end of every run, so that CI's
# log says which files to make cheaper (the default suite must stay well under 15 minutes).
_FILE_SECONDS: defaultdict[str, float] = defaultdict(float)
_TEST_SECONDS: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report) -> None:
    _FILE_SECONDS[report.nodeid.split("::", 1)[0]] += report.duration
    _TEST_SECONDS[report.nodeid] += report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if hasattr(config, "workerinput") or not _FILE_SECONDS:
        return
    total = sum(_FILE_SECONDS.values())
    terminalreporter.write_sep("=", f"test files by time ({total:.0f} s over all workers)")
    for name, seconds in sorted(_FILE_SECONDS.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{seconds:8.1f} s  {100 * seconds / total:5.1f}%  {name}")
    terminalreporter.write_sep("=", "slowest tests")
    for name, seconds in sorted(_TEST_SECONDS.items(), key=lambda item: -item[1])[:100]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {name}")
