"""Which buffers of a kernel may share storage, and how.

* A buffer always aliases itself, element by element (``"same"``).
* Pointer parameters are global memory that the caller may pass twice, or overlapping:
  two distinct pointer parameters may alias unless one of them is ``restrict`` (C's rule: an
  object modified through a restrict pointer is accessed through no other pointer) or the pair
  is in ``Kernel.disjoint`` (a gradient's shadow and a primal argument). Their
  relative offset is unknown, so any element of one may be any element of the other
  (``"any"``). The same holds between a pointer parameter and a ``__device__`` array (the
  caller may pass the array's address).
* Distinct static ``__shared__`` arrays never overlap; ``extern __shared__`` arrays all start at
  the base of the block's dynamic shared memory, so element ``i`` of one overlaps the bytes of
  element ``j`` of another exactly when their byte ranges intersect (``"bytes"``) -- except the
  parts of one split array (``Buffer.part``), which are disjoint.
* Distinct ``__device__``/``__constant__`` arrays never overlap; ``local`` arrays belong to one
  thread; different memory spaces never overlap.
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.types import PointerType


def alias_kind(kernel: n.Kernel, a: str, b: str) -> str | None:
    """``"same"``, ``"bytes"``, ``"any"`` or None (never the same storage)."""
    if a == b:
        return "same"
    pa, pb = kernel.param(a), kernel.param(b)
    ba, bb = kernel.buffer(a), kernel.buffer(b)
    a_ptr = pa is not None and isinstance(pa.ptype, PointerType)
    b_ptr = pb is not None and isinstance(pb.ptype, PointerType)
    if a_ptr or b_ptr:
        if (a_ptr and pa.ptype.restrict) or (b_ptr and pb.ptype.restrict):  # type: ignore[union-attr]
            return None
        other = bb if a_ptr else ba
        if a_ptr and b_ptr:
            return None if (a, b) in kernel.disjoint or (b, a) in kernel.disjoint else "any"
        return "any" if other is not None and other.space == "device" else None
    if ba is None or bb is None:
        return None
    if ba.space == "shared" and bb.space == "shared" and ba.shape is None and bb.shape is None:
        if ba.part is not None and bb.part is not None and ba.part[1] == bb.part[1] and ba.part[0] != bb.part[0]:
            return None  # two parts of one split: disjoint ranges of the dynamic shared memory
        return "bytes"
    return None


def describe_alias(kernel: n.Kernel, a: str, b: str) -> str:
    """Why ``a`` and ``b`` may be the same storage, for diagnostics."""
    kind = alias_kind(kernel, a, b)
    if kind == "any":
        return f"{a} and {b} may alias (pointers without restrict)"
    if kind == "bytes":
        return f"{a} and {b} share storage (extern shared arrays)"
    return ""


def shared_between_threads(kernel: n.Kernel, buffer: str) -> bool:
    """Whether two threads can access the same element of ``buffer`` (not ``local``)."""
    space = kernel.space(buffer)
    return space != "local"
