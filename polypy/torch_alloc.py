"""Fresh tensors for ``polypy.torch``: large ones on transparent huge pages (issue 38).

A tensor the wrapper returns (an output of the forward, an input's gradient from the backward)
must be new memory: the caller keeps it. PyTorch's CPU allocator takes such memory from
``malloc``, and glibc serves an allocation of 32 MiB or more (``DEFAULT_MMAP_THRESHOLD_MAX`` on
64-bit systems; smaller blocks come back from its heap, already mapped) with a fresh ``mmap`` of
4 KiB pages: every call then pays one page fault and one page clear per 4 KiB. For softmax's
4096 x 2048 float32 gradient that is 12-14 ms, most of PyTorch's own softmax backward and
more than the memory traffic of the gradient kernel itself.

``zeros(shape, dtype)`` and ``empty(shape, dtype)`` give such a large tensor an anonymous
mapping of its own, aligned to 2 MiB and advised ``MADV_HUGEPAGE``: the kernel then faults in
2 MiB pages (where it has them; it falls back to 4 KiB pages otherwise, with the same
contents). An anonymous mapping reads as zeros, so ``zeros`` writes nothing. The tensor holds
the mapping (``torch.frombuffer`` keeps a reference) and the mapping is unmapped when the
tensor's storage is freed. Its storage cannot grow (as a tensor from ``torch.frombuffer``
or ``torch.from_numpy``); everything else about it is an ordinary contiguous CPU tensor.
Smaller tensors, and systems without ``madvise``/``MADV_HUGEPAGE``, get ``torch.zeros`` /
``torch.empty``. PyTorch's own allocator does the same for every allocation of 2 MiB or more
when the environment sets ``THP_MEM_ALLOC_ENABLE=1``.
"""
from __future__ import annotations

import math
import mmap
from typing import Any, Sequence

HUGE_PAGE = 1 << 21
# glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems: from this size on, malloc maps fresh
# pages at every allocation (below it, a freed block is reused without faults).
MIN_BYTES = 32 << 20


def _huge(shape: Sequence[int], dtype: Any) -> Any | None:
    """A tensor of zeros on its own huge-page mapping, or None where that is not worth it or
    not possible here."""
    import torch

    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    itemsize = torch.empty((), dtype=dtype).element_size()
    nbytes = math.prod(shape) * itemsize
    if advice is None or not hasattr(mmap.mmap, "madvise") or nbytes < MIN_BYTES:
        return None
    try:
        mapping = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError, AttributeError):
        return None
    raw = torch.frombuffer(mapping, dtype=torch.uint8)
    offset = -raw.data_ptr() % HUGE_PAGE
    try:
        mapping.madvise(advice, offset, nbytes)
    except OSError:
        pass  # no huge pages here: the mapping is still fresh zeros in 4 KiB pages
    return raw[offset:offset + nbytes].view(dtype).view(tuple(shape))


def zeros(shape: Sequence[int], dtype: Any) -> Any:
    """A new contiguous CPU tensor of zeros (see the module docstring for large ones)."""
    import torch

    t = _huge(shape, dtype)
    return torch.zeros(tuple(shape), dtype=dtype) if t is None else t


def empty(shape: Sequence[int], dtype: Any) -> Any:
    """A new contiguous CPU tensor whose contents the caller overwrites (zeros if large)."""
    import torch

    t = _huge(shape, dtype)
    return torch.empty(tuple(shape), dtype=dtype) if t is None else t
