"""``BarrierDecision``: what ``gpu2cpu.barriers.eliminate_barriers`` decided for one barrier.

It lives on the ground floor so that the stages that read the decisions (the code generators'
comments on removed and kept barriers, ``--report``) can name the type without importing
``gpu2cpu`` (``tests/test_layering.py``).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from polypy.errors import Loc

if TYPE_CHECKING:
    from polypy.poly.hazards import Conflict


@dataclasses.dataclass(frozen=True)
class BarrierDecision:
    """What happened to one ``__syncthreads()`` and why."""

    loc: Loc | None
    removed: bool
    reason: str
    path: str
    conflict: Conflict | None = None  # for a kept barrier: the pair that needs it

    def format(self) -> str:
        where = str(self.loc) if self.loc is not None else f"<{self.path}>"
        verdict = "removed" if self.removed else "kept"
        return f"{where}: barrier {verdict}: {self.reason}"
