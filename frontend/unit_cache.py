"""A cache of answers per translation unit, kept for the last few units only.

Not a weak mapping keyed by the unit: the answers hold cursors and types, and every cursor or
type holds its unit, so no unit would ever be freed (``tests/test_frontend_memory.py``).
"""
from __future__ import annotations

import collections

import clang.cindex as ci


class PerUnit:
    """``of(tu)``: the dict of answers for unit ``tu`` (made empty on its first use); only the
    ``kept`` units used last keep theirs."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._units: "collections.OrderedDict[ci.TranslationUnit, dict]" = collections.OrderedDict()

    def of(self, tu: ci.TranslationUnit) -> dict:
        answers = self._units.get(tu)
        if answers is None:
            answers = self._units[tu] = {}
            while len(self._units) > self.kept:
                self._units.popitem(last=False)
        else:
            self._units.move_to_end(tu)
        return answers

    def __len__(self) -> int:
        return len(self._units)
