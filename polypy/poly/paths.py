"""Stable names for statements and memory accesses of a kernel, and edits by those names.

A statement is named by its *path* from the kernel body: ``(("body", 3), ("then", 0))`` is the
first statement of the ``then`` branch of the fourth top-level statement, printed
``body[3].then[0]``. An access is a path plus its position among the accesses the statement
itself performs (``body[3].then[0]#1``): the loads of the statement's own expressions in
pre-order (a load before the loads in its index), then the statement's store or atomic.
Control statements only own the loads of their header (``if`` condition, loop bounds,
``while`` condition); the statements of their bodies have their own paths.

Nothing here uses isl: ``gpu2cpu`` passes use these helpers to apply what the polyhedral model
(``polypy.poly.model``) proved, naming statements and accesses the same way the model does.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterator

from polypy.ir import nodes as n
from polypy.ir.depth import MAX_GUARDS
from polypy.ir.visitor import Mutator, Visitor, rebuild

StmtPath = tuple[tuple[str, int], ...]


def format_path(path: StmtPath) -> str:
    return ".".join(f"{field}[{index}]" for field, index in path)


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class AccessId:
    """One memory access of one statement: ``path`` and position in evaluation order."""

    path: StmtPath
    index: int

    def __str__(self) -> str:
        return f"{format_path(self.path)}#{self.index}"


def child_blocks(stmt: n.Stmt) -> tuple[tuple[str, tuple[n.Stmt, ...]], ...]:
    """The statement lists nested in ``stmt`` with their field names, in execution order
    (the node class's ``BLOCKS``)."""
    return tuple((name, getattr(stmt, name)) for name in stmt.BLOCKS)


class _PathTracker:
    """Mixin for a ``Visitor``/``Mutator``: ``self.path`` is the path of the statement being
    visited, kept by ``visit_block`` (the index) and ``enter_field`` (the field name)."""

    def __init__(self, prefix: StmtPath = (), field: str = "body"):
        self.prefix: list[tuple[str, int]] = list(prefix)
        self.fields: list[str] = [field]

    @property
    def path(self) -> StmtPath:
        return tuple(self.prefix)

    def enter_field(self, node: n.Node, name: str) -> None:
        self.fields.append(name)

    def exit_field(self, node: n.Node, name: str) -> None:
        self.fields.pop()


# Expression fields a statement evaluates itself, in the order the model numbers their loads.
_HEADER_FIELDS: dict[type, tuple[str, ...]] = {
    n.Decl: ("init",),
    n.Assign: ("value",),
    n.Store: ("index", "value"),
    n.AtomicRMW: ("index", "compare", "value"),
    n.Shuffle: ("value", "lane", "width", "mask"),
    n.Vote: ("pred", "mask"),
    n.Print: ("args",),  # its loads are reads like any other (a barrier before them stays)
    n.AssertFail: ("where",),
    n.Launch: ("grid", "block", "shmem", "args"),
    n.If: ("cond",),
    n.For: ("start", "stop", "step"),
    n.While: ("cond",),
}


def header_exprs(stmt: n.Stmt) -> tuple[n.Expr, ...]:
    """The expressions ``stmt`` evaluates itself (not those of nested statements)."""
    out: list[n.Expr] = []
    for name in _HEADER_FIELDS.get(type(stmt), ()):
        value = getattr(stmt, name)
        if isinstance(value, n.Expr):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(value)
    return tuple(out)


@dataclasses.dataclass(frozen=True, slots=True)
class RawAccess:
    """A memory access found in a statement, before any polyhedral modelling.

    ``kind`` is ``read`` (a ``Load``), ``write`` (a ``Store``) or ``atomic``. ``guards`` are the
    conditions under which short-circuit evaluation (``&&``, ``||``, ``?:``) evaluates a load:
    ``(cond, True)`` when ``cond`` must hold, ``(cond, False)`` when it must not. ``node`` is
    the ``Load`` expression or the statement itself. Only the outermost ``MAX_GUARDS`` guards
    are kept (``all_guards`` says whether that is all of them): the loads of a 10,000-arm ``?:``
    chain would otherwise hold 50,000,000 guards between them.
    """

    index: int
    kind: str
    buffer: str
    indices: tuple[n.Expr, ...]
    node: n.Node
    guards: tuple[tuple[n.Expr, bool], ...] = ()
    all_guards: bool = True

    @property
    def conditional(self) -> bool:
        return bool(self.guards)


class _LoadCollector(Visitor):
    def __init__(self) -> None:
        self.loads: list[tuple[n.Load, tuple[tuple[n.Expr, bool], ...], bool]] = []
        self.guards: list[tuple[n.Expr, bool]] = []

    def visit_Load(self, e: n.Load) -> None:
        self.loads.append((e, tuple(self.guards[:MAX_GUARDS]), len(self.guards) <= MAX_GUARDS))
        self.generic_visit(e)

    def _guarded(self, e: n.Expr, cond: n.Expr, holds: bool) -> None:
        self.guards.append((cond, holds))
        self.visit(e)
        self.guards.pop()

    def visit_Binary(self, e: n.Binary) -> None:
        self.visit(e.a)
        if e.op in ("land", "lor"):
            self._guarded(e.b, e.a, e.op == "land")
        else:
            self.visit(e.b)

    def visit_Select(self, e: n.Select) -> None:
        self.visit(e.cond)
        self._guarded(e.a, e.cond, True)
        self._guarded(e.b, e.cond, False)


def statement_accesses(stmt: n.Stmt) -> tuple[RawAccess, ...]:
    """The accesses ``stmt`` performs itself, numbered as ``AccessId.index``."""
    collector = _LoadCollector()
    for e in header_exprs(stmt):
        collector.visit(e)
    out = [RawAccess(i, "read", load.buffer, load.index, load, guards, complete)
           for i, (load, guards, complete) in enumerate(collector.loads)]
    if isinstance(stmt, n.Store):
        out.append(RawAccess(len(out), "write", stmt.buffer, stmt.index, stmt))
    elif isinstance(stmt, n.AtomicRMW):
        out.append(RawAccess(len(out), "atomic", stmt.buffer, stmt.index, stmt))
    return tuple(out)


class _Statements(_PathTracker, Visitor):
    def __init__(self, prefix: StmtPath, field: str):
        super().__init__(prefix, field)
        self.found: list[tuple[StmtPath, n.Stmt]] = []

    def visit_Expr(self, e: n.Expr) -> None:
        pass  # statements only

    def visit_block(self, block: tuple[n.Stmt, ...]) -> None:
        field = self.fields[-1]
        for i, stmt in enumerate(block):
            self.prefix.append((field, i))
            self.found.append((self.path, stmt))
            self.visit(stmt)
            self.prefix.pop()


def iter_statements(body: tuple[n.Stmt, ...], prefix: StmtPath = (), field: str = "body"
                    ) -> Iterator[tuple[StmtPath, n.Stmt]]:
    """Every statement under ``body`` with its path, in program (pre-)order."""
    collector = _Statements(prefix, field)
    collector.visit_block(body)
    return iter(collector.found)


def statement_at(kernel: n.Kernel, path: StmtPath) -> n.Stmt:
    block: tuple[n.Stmt, ...] = kernel.body
    stmt: n.Stmt | None = None
    for depth, (field, index) in enumerate(path):
        if depth > 0:
            assert stmt is not None
            block = dict(child_blocks(stmt))[field]
        stmt = block[index]
    if stmt is None:
        raise KeyError(format_path(path))
    return stmt


Edit = Callable[[n.Stmt], tuple[n.Stmt, ...]]


def edit_statements(kernel: n.Kernel, edits: dict[StmtPath, Edit]) -> n.Kernel:
    """``kernel`` with the statement at each path replaced by what its edit returns.

    Paths name statements of the *input* kernel; nested statements are edited first, so an
    edit of a control statement sees its already-edited body. An edit may return ``()`` to
    delete the statement or several statements to splice in.
    """
    if not edits:
        return kernel
    return _Editor(edits).visit(kernel)


class _Editor(_PathTracker, Mutator):
    def __init__(self, edits: dict[StmtPath, Edit]):
        super().__init__()
        self.edits = edits

    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e

    def visit_Param(self, p: n.Param) -> n.Param:
        return p

    def visit_Buffer(self, b: n.Buffer) -> n.Buffer:
        return b

    def visit_block(self, block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        field = self.fields[-1]
        out: list[n.Stmt] = []
        changed = False
        for i, stmt in enumerate(block):
            self.prefix.append((field, i))
            new = self.visit(stmt)  # nested statements first
            edit = self.edits.get(self.path)
            self.prefix.pop()
            if edit is not None:
                replacement = tuple(edit(new))
                out.extend(replacement)
                changed = changed or len(replacement) != 1 or replacement[0] is not stmt
            else:
                out.append(new)
                changed = changed or new is not stmt
        return tuple(out) if changed else block


class _LoadReplacer(Mutator):
    """Replaces loads by their pre-order number (the numbering of ``statement_accesses``)."""

    def __init__(self, mapping: dict[int, n.Expr]):
        self.mapping = mapping
        self.count = 0

    def visit_Load(self, e: n.Load) -> n.Expr:
        mine = self.count
        self.count += 1
        rebuilt = self.generic_visit(e)  # numbers the loads in the index, as the collector does
        return self.mapping.get(mine, rebuilt)

    def visit_Binary(self, e: n.Binary) -> n.Expr:
        return self.generic_visit(e)  # same left-to-right order as the collector


def replace_loads(stmt: n.Stmt, mapping: dict[int, n.Expr]) -> n.Stmt:
    """``stmt`` with its own loads number ``i`` replaced by ``mapping[i]``."""
    replacer = _LoadReplacer(mapping)
    changes = {}
    for name in _HEADER_FIELDS.get(type(stmt), ()):  # in the numbering's order
        value = getattr(stmt, name)
        if isinstance(value, n.Expr):
            changes[name] = replacer.visit(value)
        elif isinstance(value, tuple):
            changes[name] = tuple(replacer.visit(v) for v in value)
    return rebuild(stmt, **changes)
