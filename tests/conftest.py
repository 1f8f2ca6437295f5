"""Shared pytest configuration: the repository root is importable (for ``samples``)."""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_addoption(parser) -> None:
    parser.addoption("--random-kernels", type=int, default=None, metavar="N",
                     help="tests/test_random_kernels.py: run seeds 0..N-1 (default: its DEFAULT_KERNELS; "
                          "also POLYPY_RANDOM_KERNELS=N)")
