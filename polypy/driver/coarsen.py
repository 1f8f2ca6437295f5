"""Block coarsening wired for the backends: the block function of coarse blocks for a launch
shape (``coarsen_for_block``, the JIT) and the per-kernel coarsener ``codegen.c`` takes
(``block_coarsener``, also for the launches of whole programs).

Both are part of the lowering and live with the pipelines (``polypy.driver.pipelines``), whose
``lower_and_emit`` uses them for whole programs; this module is their public name.
"""
from __future__ import annotations

from polypy.driver.pipelines import block_coarsener, coarsen_for_block

__all__ = ["block_coarsener", "coarsen_for_block"]
