"""The base of the IR nodes: ``Node`` and the ``_node`` decorator (frozen, slotted, hash
remembered). The nodes are used through ``polypy.ir.nodes``."""
from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import ClassVar

from polypy.errors import Loc


def _node(cls: type) -> type:
    """A frozen, slotted dataclass whose hash is computed once per node (``_memo_hash``)."""
    cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
    computed = cls.__dict__.get("__hash__")
    if computed is not None:
        cls.__hash__ = _memo_hash(computed)
    return cls


def _memo_hash(compute):
    """The dataclass hash of the node's fields, remembered in the node: a node's hash is its
    children's hashes combined, so without the memo hashing a tree walks all of it, and a pass
    that hashes every level of a 100,000-term sum would take quadratic time."""

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = compute(self)
            object.__setattr__(self, "_hash", h)
        return h

    return __hash__


@_node
class Node:
    """Base of every IR node.

    ``CHILDREN`` (a class attribute, not a field) names, in field order, the fields that hold
    nodes or tuples of nodes (``None`` allowed): the ``Visitor`` and ``Mutator`` walk exactly
    these. ``BLOCKS`` names those among them that are statement lists (``If.then``, ``For.body``,
    ...), which the traversals hand to ``visit_block``. Every class with child fields lists
    them; the others inherit ``()``.
    """

    CHILDREN: ClassVar[tuple[str, ...]] = ()
    BLOCKS: ClassVar[tuple[str, ...]] = ()

    loc: Loc | None = field(default=None, compare=False, kw_only=True, repr=False)
    # The memo of ``__hash__`` (see ``_memo_hash``); not part of the node's value.
    _hash: int | None = field(default=None, init=False, compare=False, repr=False)
    # The memo of ``polypy.ir.queries.tree_size``; not part of the node's value.
    _size: int | None = field(default=None, init=False, compare=False, repr=False)
    # The memo of ``polypy.ir.queries``' questions about what a statement writes and declares
    # (a ``queries.StatementFacts``, kept for statements that hold blocks); not part of the value.
    _facts: object = field(default=None, init=False, compare=False, repr=False)
