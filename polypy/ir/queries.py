"""Small read-only questions about IR trees, shared by passes and stages."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.ir.visitor import iter_children, walk


def written_names(node: n.Node | Iterable[n.Node]) -> set[str]:
    """Local names written by ``Assign`` or as the destination of atomics and warp operations."""
    out: set[str] = set()
    for x in _nodes(node):
        if isinstance(x, n.Assign):
            out.add(x.name)
        elif isinstance(x, (n.AtomicRMW, n.Shuffle, n.Vote)) and x.dest is not None:
            out.add(x.dest)
    return out


def definition_counts(node: n.Node | Iterable[n.Node]) -> Counter[str]:
    """How many statements define each local: ``Assign``, ``Decl``, a ``For``'s counter, the
    destination of atomics and warp operations."""
    out: Counter[str] = Counter()
    for x in _nodes(node):
        if isinstance(x, (n.Assign, n.Decl)):
            out[x.name] += 1
        elif isinstance(x, n.For):
            out[x.var] += 1
        elif isinstance(x, (n.AtomicRMW, n.Shuffle, n.Vote)) and x.dest is not None:
            out[x.dest] += 1
    return out


def read_names(node: n.Node | Iterable[n.Node]) -> set[str]:
    """Names read through ``Var`` expressions."""
    return {x.name for x in _nodes(node) if isinstance(x, n.Var)}


def nodes_reading(root: n.Node, names: set[str] | frozenset[str]) -> set[int]:
    """The ``id`` of every node under ``root`` (``root`` included) whose subtree reads a ``Var``
    named in ``names``: one walk, children before parents, so that a pass asking the question
    at every level of a 20,000-term sum does not walk the sum 20,000 times. The ids stay valid
    while ``root`` (which holds every node) is alive."""
    hit: set[int] = set()
    for x in reversed(list(walk(root))):
        if (isinstance(x, n.Var) and x.name in names) or any(id(c) in hit for c in iter_children(x)):
            hit.add(id(x))
    return hit


def tree_size(root: n.Node) -> int:
    """How many nodes ``root``'s tree has (a node reached twice counts twice), remembered in each
    node: asked at every level of a long sum, the question costs one walk in all."""
    order: list[n.Node] = []
    stack = [root]
    while stack:  # the nodes not yet measured, parents before children
        x = stack.pop()
        if x._size is None:
            order.append(x)
            stack.extend(iter_children(x))
    for x in reversed(order):
        if x._size is None:
            object.__setattr__(x, "_size", 1 + sum(c._size for c in iter_children(x)))
    return root._size  # type: ignore[return-value]


def read_counts(node: n.Node | Iterable[n.Node]) -> Counter[str]:
    return Counter(x.name for x in _nodes(node) if isinstance(x, n.Var))


def declared_names(node: n.Node | Iterable[n.Node]) -> set[str]:
    out: set[str] = set()
    for x in _nodes(node):
        if isinstance(x, n.Decl):
            out.add(x.name)
        elif isinstance(x, n.For):
            out.add(x.var)
    return out


def local_types(node: n.Node | Iterable[n.Node]) -> dict[str, ScalarType]:
    """The type of every local declared in ``node``: ``Decl`` names and loop variables."""
    out: dict[str, ScalarType] = {}
    for x in _nodes(node):
        if isinstance(x, n.Decl):
            out[x.name] = x.vtype
        elif isinstance(x, n.For):
            out[x.var] = x.vtype
    return out


def buffers_written(node: n.Node | Iterable[n.Node]) -> set[str]:
    return {x.buffer for x in _nodes(node) if isinstance(x, (n.Store, n.AtomicRMW))}


def buffers_read(node: n.Node | Iterable[n.Node]) -> set[str]:
    out = {x.buffer for x in _nodes(node) if isinstance(x, n.Load)}
    out |= {x.buffer for x in _nodes(node) if isinstance(x, n.AtomicRMW)}
    return out


def contains(node: n.Node | Iterable[n.Node], *classes: type) -> bool:
    return any(isinstance(x, classes) for x in _nodes(node))


def has_load(e: n.Expr) -> bool:
    return contains(e, n.Load)


def uses_thread_index(node: n.Node | Iterable[n.Node]) -> bool:
    return contains(node, n.ThreadIdx)


def conjuncts(e: n.Expr) -> list[n.Expr]:
    """The operands of ``e``'s ``&&`` chain, left to right (``[e]`` where ``e`` is no ``&&``)."""
    if isinstance(e, n.Binary) and e.op == "land":
        return conjuncts(e.a) + conjuncts(e.b)
    return [e]


def conjunction(atoms: list[n.Expr]) -> n.Expr:
    """``atoms[0] && atoms[1] && ...``, nested to the left; each ``&&`` has its right atom's
    location. ``atoms`` is not empty."""
    out = atoms[0]
    for a in atoms[1:]:
        out = n.Binary("land", out, a, loc=a.loc)
    return out


def _nodes(node: n.Node | Iterable[n.Node]) -> Iterable[n.Node]:
    if isinstance(node, n.Node):
        yield from walk(node)
    else:
        for item in node:
            yield from walk(item)
