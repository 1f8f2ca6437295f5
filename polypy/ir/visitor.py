"""One generic ``Visitor`` and one ``Mutator`` for the IR.

Both dispatch on ``visit_<ClassName>`` (looked up once per class, most specific class first,
and cached) and fall back to ``generic_visit``, which walks the node's ``CHILDREN`` (the child
field names each node class lists in ``polypy.ir.nodes``). No pass walks children by hand.

The ``Mutator`` rebuilds a node only when a child changed (``result is node`` means "no
change"), so sharing is preserved and a pass can tell cheaply whether it did anything. In a
statement list a ``visit_*`` may return one statement, a tuple of statements (spliced in place)
or ``None`` (deleted).

Scoped hooks (both classes), so that passes keep loop stacks and facts without recursing by
hand; each is optional and costs nothing when absent:

* ``enter_<ClassName>(node)`` / ``exit_<ClassName>(node)``: run around the whole visit of a
  node of that class (most specific class first, like ``visit_*``), whether the node is handled
  by ``generic_visit`` or by an overriding ``visit_<ClassName>``; ``exit_*`` gets the original
  node and runs even when the visit raises.
* ``enter_field(node, name)`` / ``exit_field(node, name)``: run by ``generic_visit`` around the
  visit of each child field, e.g. to assume ``cond`` inside ``If.then`` and ``!cond`` inside
  ``If.orelse``, or to know that ``For.var`` is in scope in ``body`` but not in ``stop``.

Order for ``for (...) { s }`` visited by a ``Mutator`` with every hook::

    enter_For(loop)
      enter_field(loop, "start") ... exit_field(loop, "start")    (likewise stop, step)
      enter_field(loop, "body")  enter_<S>(s) ... exit_<S>(s)  exit_field(loop, "body")
    exit_For(loop)

Statement lists (the fields a node class names in ``BLOCKS``: ``If.then``/``orelse``,
``For.body``, ``While.body``/``update``, ``Kernel.body``) go through ``visit_block``, which a pass
overrides to rewrite a statement together with its siblings (e.g. ``if (c) {A; return} B``);
with ``enter_field`` it knows which field the block is.

Each node remembers which node classes its tree holds (``kinds_of``, a bit mask), so
``generic_visit`` does not go into a child whose tree holds no class the traversal has a
``visit_``/``enter_``/``exit_`` method for (the child is left as it is, as a visit would have
left it), ``walk_only(root, *classes)`` walks only the subtrees holding those classes and
``has_kind`` answers at once: a pass about loops or loads costs nothing in a 100,000-term sum
of locals. A traversal that overrides ``visit``, ``generic_visit`` or ``visit_tuple`` sees every
node; one that overrides ``visit_block`` every statement list.

``rebuild(node, **fields)`` is the identity-preserving ``dataclasses.replace`` for passes that
rebuild a node themselves: it returns ``node`` when every new value is the old one (tuples:
item by item).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Sequence

from polypy.ir.node_base import kinds_of, mask_of
from polypy.ir.nodes import Expr, Node, Stmt


def child_fields(cls: type) -> tuple[str, ...]:
    """Names of the fields of ``cls`` that hold nodes or tuples of nodes (``cls.CHILDREN``)."""
    return cls.CHILDREN  # type: ignore[attr-defined]


def iter_children(node: Node) -> Iterator[Node]:
    for name in node.CHILDREN:
        value = getattr(node, name)
        if isinstance(value, Node):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, Node):
                    yield item


def _same(old: Any, new: Any) -> bool:
    if new is old:
        return True
    if isinstance(old, tuple) and isinstance(new, tuple) and len(old) == len(new):
        return all(a is b for a, b in zip(old, new))
    return False


def rebuild(node: Node, **fields: Any) -> Any:
    """``dataclasses.replace(node, **fields)``, or ``node`` itself when nothing changed.

    A value counts as unchanged when it *is* the old one, or is a tuple of the very same items
    (so ``tuple(f(x) for x in old)`` with ``f`` changing nothing keeps ``node``).
    """
    changes = {name: value for name, value in fields.items() if not _same(getattr(node, name), value)}
    if not changes:
        return node
    return dataclasses.replace(node, **changes)


class _Traversal:
    """Dispatch and hooks shared by ``Visitor`` and ``Mutator``."""

    # (type(self), type(node)) -> (visit method, enter hook or None, exit hook or None)
    _dispatch_cache: dict[tuple[type, type], tuple[Callable[..., Any], Any, Any]]
    _field_hooks: bool = False
    # The node classes this traversal has a ``visit_``/``enter_``/``exit_`` method for, as a mask
    # of ``kinds_of`` (computed on first use; 0: not known yet; -1: every class counts).
    _wanted: int = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch_cache = {}
        cls._wanted = 0
        cls._field_hooks = (getattr(cls, "enter_field") is not _Traversal.enter_field
                            or getattr(cls, "exit_field") is not _Traversal.exit_field)

    def _methods(self, cls: type) -> tuple[Callable[..., Any], Any, Any]:
        key = (type(self), cls)
        found = self._dispatch_cache.get(key)
        if found is None:
            found = (_find_method(type(self), cls, "visit_", "generic_visit"),
                     _find_method(type(self), cls, "enter_", None),
                     _find_method(type(self), cls, "exit_", None))
            self._dispatch_cache[key] = found
        return found

    @classmethod
    def _wanted_mask(cls) -> int:
        """What ``generic_visit`` may not skip: a child whose tree holds no node class with a
        ``visit_``/``enter_``/``exit_`` method of this traversal is left as it is (a Mutator
        would return it unchanged) without being walked, so a pass about loads or loops costs
        nothing in a 100,000-term sum of locals. One that overrides ``visit_block`` also goes
        into every statement that holds blocks. One that overrides ``visit``,
        ``generic_visit`` or ``visit_tuple`` sees everything (-1)."""
        if cls._wanted:
            return cls._wanted
        base = Mutator if issubclass(cls, Mutator) else Visitor
        if any(getattr(cls, name, None) is not getattr(base, name, None) for name in ("visit", "generic_visit", "visit_tuple")):
            cls._wanted = -1
            return -1
        classes = tuple(getattr(cls, name) and _node_class(name.split("_", 1)[1])
                        for name in dir(cls) if name.startswith(("visit_", "enter_", "exit_"))
                        and name not in ("visit_block", "visit_tuple", "visit_all", "enter_field", "exit_field"))
        if any(c is None for c in classes):  # a method named after no node class: be safe
            cls._wanted = -1
            return -1
        if cls.visit_block is not base.visit_block:  # it sees every statement list
            classes += _block_classes()
        cls._wanted = mask_of(classes) or 1 << 200  # (1 << 200: no class; never 0)
        return cls._wanted

    def visit(self, node: Node) -> Any:
        method, enter, exit_ = self._methods(type(node))
        if enter is None and exit_ is None:
            return method(self, node)
        if enter is not None:
            enter(self, node)
        if exit_ is None:
            return method(self, node)
        try:
            return method(self, node)
        finally:
            exit_(self, node)

    def enter_field(self, node: Node, name: str) -> None:
        """Called before ``generic_visit`` visits child field ``name`` of ``node``."""

    def exit_field(self, node: Node, name: str) -> None:
        """Called after ``generic_visit`` visited child field ``name`` of ``node``."""


_Traversal._dispatch_cache = {}


class Visitor(_Traversal):
    """Read-only traversal. Override ``visit_<ClassName>``; call ``generic_visit`` to recurse."""

    def generic_visit(self, node: Node) -> None:
        hooks = self._field_hooks
        blocks = node.BLOCKS
        wanted = self._wanted or self._wanted_mask()
        for name in node.CHILDREN:
            value = getattr(node, name)
            if value is None:
                continue
            if isinstance(value, Node):
                if not (value._kinds or kinds_of(value)) & wanted:
                    continue
                if hooks:
                    self.enter_field(node, name)
                self.visit(value)
            elif name in blocks:
                if hooks:
                    self.enter_field(node, name)
                self.visit_block(value)
            else:
                if hooks:
                    self.enter_field(node, name)
                for item in value:
                    if isinstance(item, Node) and (item._kinds or kinds_of(item)) & wanted:
                        self.visit(item)
            if hooks:
                self.exit_field(node, name)

    def visit_block(self, block: tuple[Stmt, ...]) -> None:
        """A statement list (a field in ``BLOCKS``); override to see statements with siblings."""
        for s in block:
            self.visit(s)

    def visit_all(self, nodes: tuple[Node, ...]) -> None:
        for n in nodes:
            self.visit(n)


Visitor._dispatch_cache = {}


class Mutator(_Traversal):
    """Rebuilding traversal; see the module docstring for the statement-list protocol."""

    def generic_visit(self, node: Node) -> Node:
        changes: dict[str, Any] | None = None
        hooks = self._field_hooks
        blocks = node.BLOCKS
        wanted = self._wanted or self._wanted_mask()
        for name in node.CHILDREN:
            old = getattr(node, name)
            if old is None:
                continue
            if isinstance(old, Node) and not (old._kinds or kinds_of(old)) & wanted:
                continue  # nothing in it for this pass: unchanged
            if hooks:
                self.enter_field(node, name)
            if isinstance(old, Node):
                new = self.visit(old)
            elif name in blocks:
                new = self.visit_block(old)
            else:
                new = self.visit_tuple(old)
            if hooks:
                self.exit_field(node, name)
            if new is not old:
                if changes is None:
                    changes = {}
                changes[name] = new
        if changes is None:
            return node
        return dataclasses.replace(node, **changes)

    def visit_tuple(self, items: tuple[Any, ...]) -> tuple[Any, ...]:
        """Visit each node of ``items``; statements may be replaced by 0, 1 or many."""
        out: list[Any] = []
        changed = False
        wanted = self._wanted or self._wanted_mask()
        for item in items:
            if not isinstance(item, Node) or not (item._kinds or kinds_of(item)) & wanted:
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
        """A statement list (a field in ``BLOCKS``, or called directly); override to rewrite a
        statement together with its siblings. Returns ``block`` itself when nothing changed."""
        return self.visit_tuple(block)


Mutator._dispatch_cache = {}


def _find_method(visitor_cls: type, node_cls: type, prefix: str, fallback: str | None) -> Any:
    # Most specific class first: visit_ThreadIdx before visit_GpuIndex before generic_visit.
    for klass in node_cls.__mro__:
        method = getattr(visitor_cls, prefix + klass.__name__, None)
        if method is not None:
            return method
        if klass is Node:
            break
    return getattr(visitor_cls, fallback) if fallback is not None else None


def _node_class(name: str) -> type | None:
    """The node class called ``name`` (for ``visit_<name>``), or None."""
    from polypy.ir import nodes

    cls = getattr(nodes, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, Node) else None


def _block_classes() -> tuple[type, ...]:
    """The node classes that hold statement lists (``BLOCKS``)."""
    out: list[type] = []
    stack: list[type] = [Node]
    while stack:
        cls = stack.pop()
        if cls.BLOCKS:  # type: ignore[attr-defined]
            out.append(cls)
        stack.extend(cls.__subclasses__())
    return tuple(out)


# --------------------------------------------------------------------------- small helpers


def walk(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (``node`` included), parents before children."""
    stack = [node]
    pop, push = stack.pop, stack.append
    while stack:
        current = pop()
        yield current
        names = current.CHILDREN
        for k in range(len(names) - 1, -1, -1):  # pushed last to first: popped in field order
            value = getattr(current, names[k])
            if value is None:
                continue
            if type(value) is tuple:
                for i in range(len(value) - 1, -1, -1):
                    if isinstance(value[i], Node):
                        push(value[i])
            elif isinstance(value, Node):
                push(value)


def walk_block(block: tuple[Stmt, ...]) -> Iterator[Node]:
    for stmt in block:
        yield from walk(stmt)


_MASKS: dict[tuple[type, ...], int] = {}  # a cache: classes -> mask_of(classes)


def _mask(classes: tuple[Any, ...]) -> int:
    mask = _MASKS.get(classes)
    if mask is None:
        flat: list[type] = []
        stack = list(classes)
        while stack:  # (a tuple of classes counts as its classes, as in isinstance)
            c = stack.pop()
            stack.extend(c) if type(c) is tuple else flat.append(c)
        mask = _MASKS[classes] = mask_of(tuple(flat))
    return mask


def has_kind(root: Node | Sequence[Node], *classes: Any) -> bool:
    """Whether a node of ``classes`` is in ``root`` (a node or a tuple of nodes): ``kinds_of``,
    so asked again of an unchanged tree, the question costs nothing."""
    mask = _mask(classes)
    if not isinstance(root, Node):  # a statement list
        return any((x._kinds or kinds_of(x)) & mask for x in root)
    return bool((root._kinds or kinds_of(root)) & mask)


def walk_only(root: Node | Sequence[Node], *classes: Any) -> Iterator[Node]:
    """The nodes of ``classes`` under ``root`` (a node or a statement list), in ``walk``'s
    order, without going into subtrees that hold none (``kinds_of``): ``walk_only(kernel,
    n.Store)`` costs the statements, not the expressions of a 100,000-term sum."""
    mask = _mask(classes)
    stack = [root] if isinstance(root, Node) else list(reversed(tuple(root)))
    pop, push = stack.pop, stack.append
    while stack:
        current = pop()
        if not (current._kinds or kinds_of(current)) & mask:
            continue
        if isinstance(current, classes):
            yield current
        names = current.CHILDREN
        for k in range(len(names) - 1, -1, -1):
            value = getattr(current, names[k])
            if value is None:
                continue
            if type(value) is tuple:
                for i in range(len(value) - 1, -1, -1):
                    if isinstance(value[i], Node):
                        push(value[i])
            elif isinstance(value, Node):
                push(value)


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
