"""Helpers shared by the emulator tests (this module holds no tests)."""
from __future__ import annotations

import textwrap
from typing import Callable

import pytest

from polypy.errors import UserError
from polypy.ir import Kernel, parse_kernel

FULL_MASK = "4294967295u"


def ir(text: str) -> str:
    """IR text without the indentation of the test source, so locations count from line 1."""
    return textwrap.dedent(text).strip() + "\n"


def kernel(text: str) -> Kernel:
    return parse_kernel(ir(text))


def loc_of(text: str, snippet: str, nth: int = 0) -> tuple[int, int]:
    """(line, col), 1-based, of the ``nth`` occurrence of ``snippet`` in ``ir(text)``."""
    text = ir(text)
    pos = -1
    for _ in range(nth + 1):
        pos = text.index(snippet, pos + 1)
    line = text.count("\n", 0, pos) + 1
    col = pos - text.rfind("\n", 0, pos)
    return line, col


def expect_error(run: Callable[[], object], text: str, snippet: str | None, *phrases: str,
                 nth: int = 0) -> UserError:
    """``run()`` raises a UserError whose message has ``phrases`` and whose location is ``snippet``."""
    with pytest.raises(UserError) as info:
        run()
    err = info.value
    for phrase in phrases:
        assert phrase in err.message, f"{phrase!r} not in {err.message!r}"
    if snippet is not None:
        assert err.loc is not None, err.message
        assert (err.loc.line, err.loc.col) == loc_of(text, snippet, nth), str(err)
    return err
