"""The set of lanes (threads of a chunk) that execute the current statement.

Divergent control flow never runs a lane that is not taking the path: an ``If`` evaluates its
branches on the lanes whose condition holds, ``&&``/``||``/``?:`` evaluate an operand only on
the lanes that need it, loops shrink the set as threads leave. Evaluating on the *compressed*
set (values are vectors over the active lanes only) means a masked-off lane can never divide
by zero or load out of bounds, and the cost of a statement follows the number of threads that
really execute it.

A value is either a 1-D NumPy array with one entry per active lane (in lane order) or a NumPy
scalar when it is the same for every lane (parameters, constants, ``blockDim``...).
"""
from __future__ import annotations

from typing import Any

import numpy as np


class LaneSet:
    """Sorted lane ids of a chunk; ``idx is None`` means every lane of the chunk."""

    __slots__ = ("idx", "count", "size", "cache")

    def __init__(self, idx: np.ndarray | None, size: int):
        self.idx = idx
        self.size = size  # lanes in the chunk
        self.count = size if idx is None else len(idx)
        self.cache: dict[Any, np.ndarray] = {}  # gathers of per-lane constants (threadIdx...)

    @classmethod
    def all(cls, size: int) -> LaneSet:
        return cls(None, size)

    @property
    def is_all(self) -> bool:
        return self.idx is None

    @property
    def ids(self) -> np.ndarray:
        """The lane ids as an array (materialized once for the full set)."""
        if self.idx is not None:
            return self.idx
        ids = self.cache.get("ids")
        if ids is None:
            ids = np.arange(self.size, dtype=np.int64)
            self.cache["ids"] = ids
        return ids

    def take(self, values: np.ndarray | np.generic) -> np.ndarray | np.generic:
        """The active lanes' entries of a chunk-wide vector (scalars are uniform: returned as is)."""
        if self.idx is None or not isinstance(values, np.ndarray):
            return values
        return values[self.idx]

    def take_cached(self, key: Any, values: np.ndarray) -> np.ndarray:
        """``take`` for chunk-wide vectors that never change (thread coordinates)."""
        if self.idx is None:
            return values
        got = self.cache.get(key)
        if got is None:
            got = values[self.idx]
            self.cache[key] = got
        return got

    def select(self, cond: np.ndarray | np.generic | bool) -> LaneSet:
        """The lanes whose entry of ``cond`` (a vector over this set, or a scalar) is true."""
        if not isinstance(cond, np.ndarray) or cond.ndim == 0:
            return self if cond else LaneSet(_EMPTY, self.size)
        positions = np.flatnonzero(cond)
        if len(positions) == self.count:
            return self
        return LaneSet(self.ids[positions], self.size)

    def put(self, target: np.ndarray, values: np.ndarray | np.generic) -> None:
        """Write ``values`` (one per active lane, or uniform) into a chunk-wide vector."""
        if self.idx is None:
            target[:] = values
        else:
            target[self.idx] = values

    def broadcast(self, values: np.ndarray | np.generic) -> np.ndarray:
        """``values`` as a vector with one entry per active lane."""
        if isinstance(values, np.ndarray) and values.ndim == 1:
            return values
        return np.full(self.count, values)


_EMPTY = np.zeros(0, dtype=np.int64)
