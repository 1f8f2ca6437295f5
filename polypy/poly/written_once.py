"""Whether every element of a buffer is written at most once by a launch (``written_once``).

A gradient consumes the seed of an output element where the kernel stores it: it reads the
element's shadow, then zeroes it, so that an earlier store of the same element (later in the
reverse sweep) sees no seed. Where the kernel only stores to the buffer and isl proves that no
two store instances of one launch -- two threads, two blocks, two iterations of one thread, or
two statements -- write the same element, nothing in ``K_grad`` reads the shadow after its
zeroing: a caller that does not read the shadow afterwards may drop those stores
(``autodiff.scratch``). Loads and atomics of the buffer: not proved; an index isl does not
know may be any element (as in ``polypy.poly.sharing``), a domain it over-approximates only
adds instances to the question.
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.poly.model import build_model
from polypy.poly.relations import Copies
from polypy.poly.sharing import _shared_pairs


def written_once(kernel: n.Kernel, buffer: str) -> bool:
    """Whether ``kernel`` only stores to ``buffer`` and, in every launch, no
    element is stored by two different store instances (proved with isl)."""
    model = build_model(kernel)
    accesses = model.accesses_of(buffer)
    if not accesses or any(a.kind != "write" for a in accesses):
        return False
    c = Copies(model, ("1", "2"))
    apart = c.other_thread_pieces("1", "2") + c.other_block_pieces("1", "2")
    same = c.same_thread("1", "2")
    for i, a in enumerate(accesses):
        for b in accesses[i:]:
            shared = _shared_pairs(c, a, b)
            if shared is None:
                continue
            if any(not (shared & piece).is_empty() for piece in apart):
                return False
            mine = shared & same
            if a is b:  # one statement: two of its instances in one thread (the pairs are symmetric)
                mine = mine & c.lex_lt(a.time, "1", a.time, "2")
            if not mine.is_empty():
                return False
    return True
