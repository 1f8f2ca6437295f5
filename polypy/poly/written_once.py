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

``written_once_when`` asks the same question of the parameters: a grid-uniform condition (an
IR expression over the launch and the integer arguments, as ``polypy.poly.sharing`` finds for
privacy) under which no element is stored twice, where that does not hold at every launch
(softmax's rows ``y + blockIdx.x * cols``, an unsigned product that may wrap modulo 2**32:
two blocks' rows could meet only where ``(gridDim.x - 1) * cols`` does not fit in 32 bits).
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.poly.model import build_model
from polypy.poly.relations import Copies
from polypy.poly.sharing import _private_condition, _Search, _shared_pairs


def written_once(kernel: n.Kernel, buffer: str) -> bool:
    """Whether ``kernel`` only stores to ``buffer`` and, in every launch, no
    element is stored by two different store instances (proved with isl)."""
    questions = _questions(kernel, buffer)
    if questions is None:
        return False
    _, c, pairs = questions
    for (a, b), pieces in pairs:
        shared = _shared_pairs(c, a, b)
        if shared is not None and any(not (shared & piece).is_empty() for piece in pieces):
            return False
    return True


def written_once_when(kernel: n.Kernel, buffer: str) -> n.Expr | None:
    """A grid-uniform condition under which ``kernel``, which only stores to ``buffer``, stores
    no element of it twice in a launch (``written_once`` under a condition on the launch and the
    integer arguments), or None: none found within ``polypy.poly.sharing``'s budget, or the
    buffer is not only stored to. Ask ``written_once`` first: where it holds at every launch,
    the search finds no pair to exclude and answers None too."""
    questions = _questions(kernel, buffer)
    if questions is None:
        return None
    model, c, pairs = questions
    return _private_condition(model, c, [([pair], pieces) for pair, pieces in pairs], _Search())


def _questions(kernel: n.Kernel, buffer: str):
    """``(model, copies, [((a, b), pieces)])``: for each pair of stores to ``buffer``, the
    instance pairs in which touching one element is a second store of it (other threads, other
    blocks; in one thread, the later instance of one statement); None where the kernel does
    anything but store to the buffer."""
    model = build_model(kernel)
    accesses = model.accesses_of(buffer)
    if not accesses or any(a.kind != "write" for a in accesses):
        return None
    c = Copies(model, ("1", "2"))
    apart = c.other_thread_pieces("1", "2") + c.other_block_pieces("1", "2")
    same = c.same_thread("1", "2")
    pairs = []
    for i, a in enumerate(accesses):
        for b in accesses[i:]:
            # one statement: two of its instances in one thread (the pairs are symmetric)
            mine = same & c.lex_lt(a.time, "1", a.time, "2") if a is b else same
            pairs.append(((a, b), apart + [mine]))
    return model, c, pairs
