"""Atomic read-modify-write, serialized in lane order (the linear thread order of the grid).

When several lanes of one statement hit one address, the result is the sequential execution of
their operations in lane order; the old value each lane sees is the value just before its own
turn. Float additions therefore round exactly as that sequence would.

Cheap paths, because histograms and reductions are hot:

* no old values wanted, and the operation is a NumPy ufunc: ``ufunc.at`` (unbuffered, applied
  in index order, so it *is* the lane-order sequence);
* otherwise lanes are grouped by address. Addresses hit by many lanes fold their group with
  ``ufunc.accumulate`` (strictly left to right); the rest run "rank by rank": every address's
  first lane, then every address's second lane... each step vectorized over addresses.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from polypy.emulator.heap import heap_rmw
from polypy.ir.stmts import HEAP_OPS

Value = np.ndarray | np.generic

_UFUNCS: dict[str, np.ufunc] = {
    "add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}

# A group larger than this is folded on its own with accumulate rather than rank by rank.
_BIG_GROUP = 32


def _combine(op: str, old: Value, value: Value, compare: Value | None) -> Value:
    """The value stored by one atomic ``op`` on ``old`` (CUDA's definitions)."""
    ufunc = _UFUNCS.get(op)
    if ufunc is not None:
        return ufunc(old, value)
    if op == "exch":
        return value
    if op == "cas":  # compares bits, as CUDA's atomicCAS does (a float CAS comes from a typed view)
        old_a, compare_a = np.asarray(old), np.asarray(compare, dtype=np.asarray(old).dtype)
        if old_a.dtype.kind == "f":
            bits = np.dtype(f"i{old_a.dtype.itemsize}")
            return np.where(old_a.view(bits) == compare_a.view(bits), value, old)
        return np.where(old == compare, value, old)
    one = old.dtype.type(1)
    zero = old.dtype.type(0)
    if op == "inc":  # atomicInc: old >= limit ? 0 : old + 1
        return np.where(old >= value, zero, old + one)
    if op == "dec":  # atomicDec: (old == 0 || old > limit) ? limit : old - 1
        return np.where((old == zero) | (old > value), value, old - one)
    raise ValueError(f"unknown atomic operation {op!r}")


def atomic_rmw(op: str, storage: np.ndarray, flat: np.ndarray, value: Value, compare: Value | None,
               want_old: bool) -> np.ndarray | None:
    """Apply ``op`` at ``storage[flat[k]]`` for each lane ``k`` in order; the old values if wanted."""
    count = len(flat)
    value = np.broadcast_to(np.asarray(value, dtype=storage.dtype), (count,))
    if op in HEAP_OPS:  # the device heap's allocator on the heap's words (heap.py)
        return heap_rmw(op, storage, value)
    if compare is not None:
        compare = np.broadcast_to(np.asarray(compare, dtype=storage.dtype), (count,))
    if count == 0:
        return np.zeros(0, dtype=storage.dtype) if want_old else None
    ufunc = _UFUNCS.get(op)
    if not want_old and ufunc is not None:
        ufunc.at(storage, flat, value)
        return None
    return _serialized(op, storage, flat, value, compare)


def _serialized(op: str, storage: np.ndarray, flat: np.ndarray, value: np.ndarray,
                compare: np.ndarray | None) -> np.ndarray:
    n = len(flat)
    order = np.argsort(flat, kind="stable")  # lane order kept within an address
    fs, vs = flat[order], value[order]
    cs = compare[order] if compare is not None else None
    starts = np.flatnonzero(np.concatenate(([True], fs[1:] != fs[:-1])))
    sizes = np.diff(np.concatenate((starts, [n])))
    group = np.repeat(np.arange(len(starts)), sizes)
    rank = np.arange(n) - starts[group]
    old = np.empty(n, dtype=storage.dtype)

    big = sizes > _BIG_GROUP
    for g in np.flatnonzero(big):
        seg = slice(starts[g], starts[g] + sizes[g])
        address = fs[starts[g]]
        old[seg], storage[address] = _fold_group(op, storage[address], vs[seg], None if cs is None else cs[seg])

    small = ~big[group]
    if small.any():
        small_rank = np.where(small, rank, -1)
        for r in range(int(small_rank.max()) + 1):
            sel = np.flatnonzero(small_rank == r)  # distinct addresses
            address = fs[sel]
            before = storage[address]
            storage[address] = _combine(op, before, vs[sel], None if cs is None else cs[sel])
            old[sel] = before

    out = np.empty(n, dtype=storage.dtype)
    out[order] = old
    return out


def _fold_group(op: str, start: np.generic, values: np.ndarray, compare: np.ndarray | None
                ) -> tuple[np.ndarray, np.generic]:
    """Old values and final value of one address hit by ``values`` in order."""
    ufunc = _UFUNCS.get(op)
    if ufunc is not None:
        seq = np.concatenate(([start], values)).astype(values.dtype)
        acc = ufunc.accumulate(seq)  # a strict left fold: the sequential rounding
        return acc[:-1], acc[-1]
    if op == "exch":
        return np.concatenate(([start], values[:-1])).astype(values.dtype), values[-1]
    olds = np.empty(len(values), dtype=values.dtype)
    current: Value = start
    step: Callable[..., Value] = _combine
    for k in range(len(values)):  # cas / inc / dec on one hot address: rare, keep it simple
        olds[k] = current
        current = step(op, np.asarray(current), values[k], None if compare is None else compare[k])[()]
    return olds, current
