"""How a buffer's elements are shared between threads — what adjoint accumulation needs.

For a buffer (or one access of it), over every launch:

* ``thread_private``: every element is accessed by at most one thread of the whole grid, so
  the adjoint of that element can be accumulated with a plain ``+=``;
* ``block_uniform``: within each block, every instance accesses one and the same element, so
  a block-level reduction followed by one update per block suffices;
* ``block_private``: every element is accessed by at most one block (a block reduction can
  then store instead of using an atomic).

Otherwise atomics are needed. The answers are proved with isl on the symbolic model (a
launch shape may be given to decide kernels that are only analysable for fixed sizes); an
unknown index makes the corresponding answer False. Accesses through *other* pointer
parameters that may alias this one are not considered: the question is about this buffer's
own accesses (its shadow in the gradient has the same aliasing as the primal).
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.poly.model import Access, Launch, build_model
from polypy.poly.paths import AccessId
from polypy.poly.relations import Copies


@dataclasses.dataclass(frozen=True)
class Sharing:
    buffer: str
    thread_private: bool
    block_uniform: bool
    block_private: bool

    @property
    def accumulation(self) -> str:
        """``"plain"`` (+=), ``"block-reduction"`` or ``"atomic"``."""
        if self.thread_private:
            return "plain"
        if self.block_uniform:
            return "block-reduction"
        return "atomic"


def sharing(kernel: n.Kernel, buffer: str, *, access: AccessId | None = None,
            launch: Launch | None = None) -> Sharing:
    """How the elements of ``buffer`` (or those touched by ``access``) are shared."""
    model = build_model(kernel, launch=launch)
    accesses = [a for a in model.accesses_of(buffer) if access is None or a.id == access]
    if access is not None and not accesses:
        raise KeyError(str(access))
    c = Copies(model, ("1", "2"))
    pairs = [(a, b) for i, a in enumerate(accesses) for b in accesses[i:]]  # symmetric questions
    blocks = c.other_block_pieces("1", "2")
    threads = c.other_thread_pieces("1", "2") + blocks
    thread_private = all(_never_shared(c, a, b, threads) for a, b in pairs)
    block_private = thread_private or all(_never_shared(c, a, b, blocks) for a, b in pairs)
    block_uniform = all(_uniform(c, a, b) for a, b in pairs)
    return Sharing(buffer, thread_private, block_uniform, block_private)


def _never_shared(c: Copies, a: Access, b: Access, pieces: list) -> bool:
    """No instance pair of ``a`` and ``b`` in one of ``pieces`` touches the same element."""
    overlap = c.overlap(a, "1", b, "2")
    if overlap is None:
        return True
    s = c.domain(a, "1") & c.domain(b, "2") & overlap
    return all((s & piece).is_empty() for piece in pieces)


def _uniform(c: Copies, a: Access, b: Access) -> bool:
    """No two instances of one block touch different elements."""
    s = c.domain(a, "1") & c.domain(b, "2") & c.same_block("1", "2")
    return (s & c.differ(a, "1", b, "2")).is_empty()
