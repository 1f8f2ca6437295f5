"""Fresh names for what the lowering introduces (thread counters, per-thread buffers, copies).

Local names are unique in a kernel (``docs/ir.md``), so every name the lowering invents is
checked against everything the kernel already names: parameters, buffers, locals and loop
variables. Names derive from the source name they stand for (``acc`` -> ``acc_buf``,
``acc_1``), so the generated code reads like the original.
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.names import NameSupply as _NameSupply
from polypy.ir.names import kernel_names


class NameSupply(_NameSupply):
    """Fresh names for one kernel (and the module globals it may see)."""

    def __init__(self, kernel: n.Kernel, globals_: tuple[str, ...] = ()):
        super().__init__(kernel_names(kernel) | set(globals_))
