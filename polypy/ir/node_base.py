"""The base of the IR nodes: ``Node`` and the ``_node`` decorator (frozen, slotted, hash
remembered). The nodes are used through ``polypy.ir.nodes``."""
from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import ClassVar

from polypy.errors import Loc


def _node(cls: type) -> type:
    """A frozen, slotted dataclass whose hash is computed once per node (``_memo_hash``),
    pickled without its memos (``_without_memos``)."""
    cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
    computed = cls.__dict__.get("__hash__")
    if computed is not None:
        cls.__hash__ = _memo_hash(computed)
    cls.__getstate__ = _without_memos(cls)
    return cls


def _without_memos(cls: type):
    """``cls``'s pickled state with its memos (the fields ``init=False`` whose names start with
    ``_``: ``_hash``, ``_kinds``, ...) left unset: some hold what only this process means
    (``_hash`` hashes strings with this process's seed, ``_kinds`` uses the bits ``class_bit``
    gave out in the order this process first asked), and all are recomputed when asked."""
    getstate = cls.__getstate__  # the dataclass's: the values of all fields, in order
    memos = [i for i, f in enumerate(dataclasses.fields(cls)) if not f.init and f.name.startswith("_")]

    def __getstate__(self) -> list:
        state = getstate(self)
        for i in memos:
            state[i] = None
        return state

    return __getstate__


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
    # The memo of ``kinds_of``: the node classes in the node's tree, as a bit mask; not part of the value.
    _kinds: int | None = field(default=None, init=False, compare=False, repr=False)
    # The memo of ``polypy.ir.names.statement_names`` (statements only); not part of the value.
    _names: frozenset[str] | None = field(default=None, init=False, compare=False, repr=False)


# Each node class's bit in ``kinds_of``'s masks, given out on first use.
_CLASS_BITS: dict[type, int] = {}


def class_bit(cls: type) -> int:
    """``cls``'s bit in the masks of ``kinds_of`` (one bit per concrete node class)."""
    bit = _CLASS_BITS.get(cls)
    if bit is None:
        bit = _CLASS_BITS[cls] = 1 << len(_CLASS_BITS)
    return bit


def kinds_of(root: Node) -> int:
    """The classes of the nodes in ``root``'s tree (``root`` included), as a mask of
    ``class_bit``s, remembered in each node: a pass that looks for loads, say, skips a subtree
    without one in constant time, and a tree made by rebuilding a few nodes of another costs
    only those nodes. Computed children first without recursion (deep input)."""
    if root._kinds is not None:
        return root._kinds
    order: list[Node] = []
    stack = [root]
    while stack:  # the nodes not yet summed up, parents before children
        x = stack.pop()
        if x._kinds is None:
            order.append(x)
            for name in x.CHILDREN:
                value = getattr(x, name)
                if isinstance(value, Node):
                    stack.append(value)
                elif type(value) is tuple:
                    stack.extend(v for v in value if isinstance(v, Node))
    bits = _CLASS_BITS
    for x in reversed(order):
        if x._kinds is not None:  # reached twice (a shared subtree)
            continue
        cls = type(x)
        mask = bits.get(cls) or class_bit(cls)
        for name in x.CHILDREN:
            value = getattr(x, name)
            if isinstance(value, Node):
                mask |= value._kinds  # type: ignore[operator]
            elif type(value) is tuple:
                for v in value:
                    if isinstance(v, Node):
                        mask |= v._kinds  # type: ignore[operator]
        object.__setattr__(x, "_kinds", mask)
    return root._kinds  # type: ignore[return-value]


def mask_of(classes: tuple[type, ...]) -> int:
    """The mask of ``kinds_of`` covering ``classes`` and all their subclasses."""
    mask = 0
    stack = list(classes)
    while stack:
        cls = stack.pop()
        mask |= class_bit(cls)
        stack.extend(cls.__subclasses__())
    return mask
