"""The error the emulator's inner modules raise before a source location is known.

Operators, addressing and warp operations work on lane vectors and know neither the IR node
nor the thread's coordinates; they raise ``LaneFault`` with the position of the first faulty
lane, and the evaluator/executor turns it into a ``UserError`` at the node's location.
"""
from __future__ import annotations

import numpy as np


class LaneFault(Exception):
    """Undefined behaviour in lane ``position`` of the current lane set."""

    def __init__(self, message: str, position: int = 0):
        super().__init__(message)
        self.message = message
        self.position = position


def first_true(mask: np.ndarray | np.generic | bool) -> int:
    """Position of the first True in a bool vector (0 for a true scalar)."""
    if isinstance(mask, np.ndarray) and mask.ndim > 0:
        return int(np.argmax(mask))
    return 0


def pick(values: np.ndarray | np.generic, position: int) -> object:
    """Lane ``position`` of a lane vector, or the value itself when it is uniform (a scalar)."""
    if isinstance(values, np.ndarray) and values.ndim > 0:
        return values[position]
    return values
