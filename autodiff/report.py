"""What the gradient generator decided, for ``polypy grad --report``.

* ``Accumulation``: for each load of an active buffer (and each active scalar parameter), how
  its adjoint is added to the shadow: ``plain`` (``+=``, the element is proved private to one
  thread), ``versioned`` (plain where a run-time condition proved by isl holds, atomic
  otherwise; the condition is tested once per launch), ``block-reduction`` (every thread of a block adds to the same element: summed in a
  register, reduced over the block at the end, one atomic per block) or ``atomic``; on the
  CPU path, ``gather`` (a launch of its own with a plain ``+=``, ``autodiff.gather``).
* ``Caching``: for each value the reverse sweep needs that the forward sweep overwrites, how it
  is recovered: ``recompute`` (from values still available), ``closed-form`` (an induction
  variable), ``tape`` (stored in the forward sweep; size given), ``replay-shared`` (shared
  memory refilled per reverse iteration), ``replay-loop`` (loop-carried values recomputed from
  the loop entry: quadratic in the trip count; used only when the trip count is unknown);
  and ``scratch`` for an output named in ``scratch_outputs`` whose stores are left out
  (``autodiff.scratch``).
"""
from __future__ import annotations

import dataclasses

from polypy.errors import Loc


@dataclasses.dataclass(frozen=True)
class Accumulation:
    buffer: str
    access: str
    loc: Loc | None
    strategy: str  # plain | versioned | window | block-reduction | atomic | gather (polypy.driver.gathered)
    reason: str

    def format(self) -> str:
        where = f"{self.loc}: " if self.loc is not None else ""
        return f"{where}adjoint of {self.access}: {self.strategy} ({self.reason})"


@dataclasses.dataclass(frozen=True)
class Caching:
    value: str
    loc: Loc | None
    strategy: str  # recompute | closed-form | tape | replay-shared | replay-loop
    detail: str

    def format(self) -> str:
        where = f"{self.loc}: " if self.loc is not None else ""
        return f"{where}value {self.value}: {self.strategy} ({self.detail})"


Decision = Accumulation | Caching
