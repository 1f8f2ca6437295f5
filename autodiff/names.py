"""Fresh names for generated variables and buffers (``polypy.ir.names``), for one kernel."""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.names import NameSupply


class Names(NameSupply):
    """Names not used anywhere in ``kernel`` (nor handed out before)."""

    def __init__(self, kernel: n.Kernel, reserved: set[str] | frozenset[str] = frozenset()):
        super().__init__(NameSupply.for_kernel(kernel, reserved).taken)
