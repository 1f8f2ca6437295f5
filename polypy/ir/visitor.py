"""One generic ``Visitor`` and one ``Mutator`` for the IR.

Both dispatch on ``visit_<ClassName>`` (looked up once per class and cached) and fall back to
``generic_visit``, which walks the child fields found from the dataclass definition. No pass
walks children by hand.

The ``Mutator`` rebuilds a node only when a child changed (``result is node`` means "no
change"), so sharing is preserved and a pass can tell cheaply whether it did anything. In a
statement list a ``visit_*`` may return one statement, a tuple of statements (spliced in place)
or ``None`` (deleted).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

from polypy.ir.nodes import Expr, Node, Stmt

_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(cls: type) -> tuple[str, ...]:
    """Names of the fields of ``cls`` that hold nodes or tuples of nodes."""
    cached = _CHILD_FIELDS.get(cls)
    if cached is not None:
        return cached
    names = []
    for f in dataclasses.fields(cls):
        if f.name == "loc":
            continue
        annotation = str(f.type)
        if any(word in annotation for word in ("Expr", "Stmt", "Param", "Buffer", "Kernel", "SourceParam")):
            names.append(f.name)
    result = tuple(names)
    _CHILD_FIELDS[cls] = result
    return result


def iter_children(node: Node) -> Iterator[Node]:
    for name in child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, Node):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, Node):
                    yield item


class Visitor:
    """Read-only traversal. Override ``visit_<ClassName>``; call ``generic_visit`` to recurse."""

    _dispatch_cache: dict[tuple[type, type], Callable[..., Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch_cache = {}

    def visit(self, node: Node) -> Any:
        cls = type(node)
        method = self._dispatch_cache.get((type(self), cls))
        if method is None:
            method = _find_method(type(self), cls, "generic_visit")
            self._dispatch_cache[(type(self), cls)] = method
        return method(self, node)

    def generic_visit(self, node: Node) -> None:
        for child in iter_children(node):
            self.visit(child)

    def visit_all(self, nodes: tuple[Node, ...]) -> None:
        for n in nodes:
            self.visit(n)


Visitor._dispatch_cache = {}


class Mutator:
    """Rebuilding traversal; see the module docstring for the statement-list protocol."""

    _dispatch_cache: dict[tuple[type, type], Callable[..., Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch_cache = {}

    def visit(self, node: Node) -> Any:
        cls = type(node)
        method = self._dispatch_cache.get((type(self), cls))
        if method is None:
            method = _find_method(type(self), cls, "generic_visit")
            self._dispatch_cache[(type(self), cls)] = method
        return method(self, node)

    def generic_visit(self, node: Node) -> Node:
        changes: dict[str, Any] = {}
        for name in child_fields(type(node)):
            old = getattr(node, name)
            if isinstance(old, Node):
                new = self.visit(old)
                if new is not old:
                    changes[name] = new
            elif isinstance(old, tuple):
                new_tuple = self.visit_tuple(old)
                if new_tuple is not old:
                    changes[name] = new_tuple
        if not changes:
            return node
        return dataclasses.replace(node, **changes)

    def visit_tuple(self, items: tuple[Any, ...]) -> tuple[Any, ...]:
        """Visit each node of ``items``; statements may be replaced by 0, 1 or many."""
        out: list[Any] = []
        changed = False
        for item in items:
            if not isinstance(item, Node):
                out.append(item)
                continue
            new = self.visit(item)
            if new is item:
                out.append(item)
                continue
            changed = True
            if new is None:
                continue
            if isinstance(new, (tuple, list)):
                out.extend(new)
            else:
                out.append(new)
        return tuple(out) if changed else items

    def visit_block(self, block: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        return self.visit_tuple(block)


Mutator._dispatch_cache = {}


def _find_method(visitor_cls: type, node_cls: type, fallback: str) -> Callable[..., Any]:
    # Most specific class first: visit_ThreadIdx before visit_GpuIndex before generic_visit.
    for klass in node_cls.__mro__:
        method = getattr(visitor_cls, "visit_" + klass.__name__, None)
        if method is not None:
            return method
        if klass is Node:
            break
    return getattr(visitor_cls, fallback)


# --------------------------------------------------------------------------- small helpers


def walk(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (``node`` included), parents before children."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        children = list(iter_children(current))
        stack.extend(reversed(children))


def walk_block(block: tuple[Stmt, ...]) -> Iterator[Node]:
    for stmt in block:
        yield from walk(stmt)


def exprs_of(node: Node) -> Iterator[Expr]:
    """Every expression under ``node``."""
    for n in walk(node):
        if isinstance(n, Expr):
            yield n


class _Substituter(Mutator):
    def __init__(self, mapping: dict[Expr, Expr]):
        self.mapping = mapping

    def visit(self, node: Node) -> Any:
        if isinstance(node, Expr):
            replacement = self.mapping.get(node)
            if replacement is not None:
                return replacement
        return super().visit(node)


def substitute(node: Node, mapping: dict[Expr, Expr]) -> Any:
    """``node`` with every sub-expression equal to a key of ``mapping`` replaced."""
    if not mapping:
        return node
    return _Substituter(mapping).visit(node)
