"""Small read-only questions about IR trees, shared by passes and stages."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.ir.visitor import Mutator, has_kind, iter_children, walk, walk_only


def written_names(node: n.Node | Iterable[n.Node]) -> set[str]:
    """Local names written by ``Assign`` or as the destination of atomics and warp operations."""
    out: set[str] = set()
    for facts in _facts_of(node):
        out |= facts.written
    return out


def definition_counts(node: n.Node | Iterable[n.Node]) -> Counter[str]:
    """How many statements define each local: ``Assign``, ``Decl``, a ``For``'s counter, the
    destination of atomics and warp operations."""
    out: Counter[str] = Counter()
    for facts in _facts_of(node):
        out.update(facts.definitions)
    return out


def definition_writes(node: n.Node | Iterable[n.Node]) -> dict[str, int]:
    """How often each local is written (a ``Decl`` with an initializer or an ``Assign``: once; a
    loop's counter or an atomic's destination: twice)."""
    out: dict[str, int] = {}
    for facts in _facts_of(node):
        for name, k in facts.writes.items():
            out[name] = out.get(name, 0) + k
    return out


class StatementFacts:
    """What a statement and the statements nested in it write and declare, remembered in each
    statement that holds blocks (``Node._facts``): asked at every level of 1,000 nested loops,
    the questions cost one walk in all, not a walk of every level's whole body. Only statements
    are looked at (expressions write and declare nothing)."""

    __slots__ = ("written", "declared", "definitions", "writes")

    def __init__(self) -> None:
        self.written: set[str] = set()  # written_names
        self.declared: set[str] = set()  # declared_names
        self.definitions: Counter[str] = Counter()  # definition_counts
        self.writes: dict[str, int] = {}  # definition_writes

    def add_own(self, s: n.Stmt) -> None:
        if isinstance(s, n.Assign):
            self.written.add(s.name)
            self._count(s.name, 1, 1)
        elif isinstance(s, n.Decl):
            self.declared.add(s.name)
            self._count(s.name, 1, 1 if s.init is not None else 0)
        elif isinstance(s, n.For):
            self.declared.add(s.var)
            self._count(s.var, 1, 2)
        elif isinstance(s, (n.AtomicRMW, n.Shuffle, n.Vote)) and s.dest is not None:
            self.written.add(s.dest)
            self._count(s.dest, 1, 2 if isinstance(s, n.AtomicRMW) else None)

    def _count(self, name: str, definitions: int, writes: int | None) -> None:
        self.definitions[name] += definitions
        if writes is not None:  # (a warp operation's destination is no write that definition_writes counts)
            self.writes[name] = self.writes.get(name, 0) + writes

    def add(self, other: StatementFacts) -> None:
        self.written |= other.written
        self.declared |= other.declared
        self.definitions.update(other.definitions)
        for name, k in other.writes.items():
            self.writes[name] = self.writes.get(name, 0) + k


def statement_facts(s: n.Stmt) -> StatementFacts:
    """``s``'s facts; remembered in ``s`` and in every statement with blocks under it, computed
    children first without recursion."""
    if not s.BLOCKS:
        facts = StatementFacts()
        facts.add_own(s)
        return facts
    if s._facts is not None:
        return s._facts  # type: ignore[return-value]
    order: list[n.Stmt] = []
    stack: list[n.Stmt] = [s]
    while stack:  # the statements with blocks not yet summed up, parents before children
        x = stack.pop()
        if x._facts is None:
            order.append(x)
            stack.extend(c for name in x.BLOCKS for c in getattr(x, name) if c.BLOCKS)
    for x in reversed(order):
        if x._facts is not None:  # reached twice (a shared subtree)
            continue
        facts = StatementFacts()
        facts.add_own(x)
        for name in x.BLOCKS:
            for c in getattr(x, name):
                if c.BLOCKS:
                    facts.add(c._facts)  # type: ignore[arg-type]
                else:
                    facts.add_own(c)
        object.__setattr__(x, "_facts", facts)
    return s._facts  # type: ignore[return-value]


def _facts_of(node: n.Node | Iterable[n.Node]) -> Iterable[StatementFacts]:
    items = (node,) if isinstance(node, n.Node) else node
    for item in items:
        if isinstance(item, n.Stmt):
            yield statement_facts(item)
        elif isinstance(item, n.Expr):
            continue
        else:  # a kernel, a module, a buffer: whatever statements it holds
            facts = StatementFacts()
            for x in walk_only(item, n.Stmt):
                facts.add_own(x)
            yield facts


def read_names(node: n.Node | Iterable[n.Node]) -> set[str]:
    """Names read through ``Var`` expressions."""
    return {x.name for x in _only(node, n.Var)}


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
    return Counter(x.name for x in _only(node, n.Var))


def declared_names(node: n.Node | Iterable[n.Node]) -> set[str]:
    """Locals declared: ``Decl`` names and loop counters."""
    out: set[str] = set()
    for facts in _facts_of(node):
        out |= facts.declared
    return out


def local_types(node: n.Node | Iterable[n.Node]) -> dict[str, ScalarType]:
    """The type of every local declared in ``node``: ``Decl`` names and loop variables."""
    out: dict[str, ScalarType] = {}
    for x in _only(node, n.Decl, n.For):
        if isinstance(x, n.Decl):
            out[x.name] = x.vtype
        elif isinstance(x, n.For):
            out[x.var] = x.vtype
    return out


def buffers_written(node: n.Node | Iterable[n.Node]) -> set[str]:
    return {x.buffer for x in _only(node, n.Store, n.AtomicRMW)}


def buffers_read(node: n.Node | Iterable[n.Node]) -> set[str]:
    return {x.buffer for x in _only(node, n.Load, n.AtomicRMW)}


def contains(node: n.Node | Iterable[n.Node], *classes: type) -> bool:
    return has_kind(node if isinstance(node, n.Node) else tuple(node), *classes)


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


def _only(node: n.Node | Iterable[n.Node], *classes: type) -> Iterable[n.Node]:
    """The nodes of ``classes`` in ``node`` (a node or several), skipping subtrees without one."""
    return walk_only(node if isinstance(node, n.Node) else tuple(node), *classes)


def loop_depth(stmts: tuple[n.Stmt, ...], kinds: tuple[type, ...] = (n.For, n.While)) -> int:
    """How deeply loops (``for``, ``while``; or the statements of ``kinds``) nest in ``stmts``
    (0: none); a loop, not a recursion, as deep input needs."""
    deepest = 0
    stack: list[tuple[n.Node, int]] = [(s, 0) for s in stmts]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, kinds):
            depth += 1
            deepest = max(deepest, depth)
        for name in node.BLOCKS:
            stack.extend((s, depth) for s in getattr(node, name))
    return deepest


def runs_of_a_thread_range(loop: n.While) -> bool:
    """Whether ``loop`` walks one range of threads in consecutive pieces, each thread once:
    ``while (t < hi) { ...; for threads tx = t to e { ... }; t = e }`` with ``t`` written only by
    the last statement (``split_quotient_runs`` writes these). A thread in the body of such a loop
    runs it once, not once per iteration."""
    if not (isinstance(loop.cond, n.Binary) and loop.cond.op == "lt" and isinstance(loop.cond.a, n.Var)
            and loop.body and not loop.update):
        return False
    t, last = loop.cond.a.name, loop.body[-1]
    pieces = [s for s in loop.body if isinstance(s, n.For) and s.kind == "threads"]
    return (isinstance(last, n.Assign) and last.name == t and isinstance(last.value, n.Var) and len(pieces) == 1
            and pieces[0].start == loop.cond.a and pieces[0].stop == last.value
            and t not in written_names(loop.body[:-1]))


def let_values(node: n.Node | Iterable[n.Node]) -> dict[str, n.Expr]:
    """The value of every binding (``Decl.let``) in ``node``, by name (names are unique in a
    kernel, and a let is assigned nowhere: its name means that value wherever it is in scope)."""
    return {x.name: x.init for x in walk_only(node, n.Decl) if x.let and x.init is not None}


def expanded_size(roots: Iterable[n.Node], values: dict[str, n.Expr]) -> int:
    """``tree_size`` of ``roots`` with each read of a name of ``values`` counted as the size of
    its value, through the values too (``substitute_lets``): the size an analysis that looks
    through the bindings meets, which the source's names no longer make small."""
    memo: dict[str, int] = {}

    def size(node: n.Node) -> int:
        total = tree_size(node)
        for v in walk_only(node, n.Var):
            if v.name in values:
                if v.name not in memo:
                    memo[v.name] = 0  # (a value does not read its own name; guards the recursion)
                    memo[v.name] = size(values[v.name])
                total += memo[v.name] - 1
        return total

    return sum(size(x) for x in roots)


def substitute_lets(e: n.Expr, values: dict[str, n.Expr]) -> n.Expr:
    """``e`` with the names of ``values`` replaced by their values, through the values too (a let
    may read earlier ones): the expression an analysis needs where the IR reads a name. Exact
    where each value means the same at ``e`` as at its binding (lets: what they read is
    assigned nowhere in between)."""
    if not values or not any(v.name in values for v in walk_only(e, n.Var)):
        return e
    class _Substitute(Mutator):
        def visit_Var(self, v: n.Var) -> n.Expr:
            value = values.get(v.name)
            return v if value is None else self.visit(value)

    return _Substitute().visit(e)
