"""What the GPU -> CPU lowering decided, for ``polypy translate --report``."""
from __future__ import annotations

import dataclasses

from polypy.errors import Loc


@dataclasses.dataclass(frozen=True)
class LoweringDecision:
    """One decision of the lowering: where (the source construct) and what was done."""

    kernel: str
    loc: Loc | None
    message: str

    def format(self) -> str:
        where = str(self.loc) if self.loc is not None else self.kernel
        return f"{where}: {self.kernel}: {self.message}"
