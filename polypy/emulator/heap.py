"""The device heap's allocator, as the C prelude's (``polypy_atomic_malloc_u64``/``_free_u64``,
docs/device_heap.md): the same layout and the same next-fit search over the heap's 64-bit words,
so that an emulated program's heap holds what the compiled one's does. ``h`` views the whole heap
(the kernel's ``u64`` pool of it); addresses are real: ``h``'s own address plus the byte offset."""
from __future__ import annotations

import numpy as np


def heap_rmw(op: str, h: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``malloc`` (values: sizes in bytes) or ``free`` (values: addresses) for each lane in order:
    the blocks' addresses (0 when the heap has no room), or for ``free`` 0 when done and 1 when an
    address is no block in use."""
    out = np.zeros(len(values), dtype=np.uint64)
    base = h.ctypes.data
    for k, v in enumerate(int(x) for x in values):
        out[k] = _malloc(h, base, v) if op == "malloc" else _free(h, base, v)
    return out


def _merge(h: np.ndarray, at: int) -> int:
    size = int(h[at // 8])
    total = int(h[0])
    while at + size < total and int(h[(at + size) // 8 + 1]) == 0:
        if int(h[2]) == at + size:
            h[2] = at
        size += int(h[(at + size) // 8])
    h[at // 8] = size
    return size


def _malloc(h: np.ndarray, base: int, nbytes: int) -> int:
    total = int(h[0])
    if nbytes > total:
        return 0
    need = 16 + ((nbytes + 15) // 16 * 16 if nbytes else 16)
    start = at = int(h[2])
    wrapped = False
    while True:
        if at >= total:
            if wrapped:
                return 0
            wrapped, at = True, 32
        if wrapped and at >= start:
            return 0
        size = int(h[at // 8])
        if int(h[at // 8 + 1]) == 0:
            size = _merge(h, at)
            if size >= need:
                if size - need >= 32:
                    h[(at + need) // 8] = size - need
                    h[(at + need) // 8 + 1] = 0
                    h[at // 8] = need
                h[at // 8 + 1] = 1
                h[2] = at + int(h[at // 8])
                return base + at + 16
        at += size


def _free(h: np.ndarray, base: int, address: int) -> int:
    if address == 0:
        return 0
    total = int(h[0])
    if address < base + 48 or address - base - 16 >= total:
        return 1
    target, at = address - base - 16, 32
    while at < target:
        at += int(h[at // 8])
    if at != target or int(h[at // 8 + 1]) != 1:
        return 1
    h[at // 8 + 1] = 0
    return 0
