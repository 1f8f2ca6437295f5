"""Where values live in a kernel: statement paths, writers of each variable, reaching definitions.

Statements are named by paths as in ``polypy.poly.paths`` (``body[3].then[0]``). A *point* is
the position right before the statement a path names; a path whose last index equals the
length of its block is the end of that block. Questions the reverse sweep asks:

* ``overwritten_after(v, p)``: can an assignment to ``v`` run after point ``p`` in the forward
  sweep (later in the block or an enclosing block, or anywhere in an enclosing loop, whose next
  iteration runs again)? If not, ``v`` still holds its value at ``p`` when the reverse sweep runs.
* ``reaching_def(v, p)``: the single assignment whose value ``v`` holds at ``p``, if the code
  structure makes it unique; otherwise where the ambiguity comes from (an enclosing loop's
  previous iteration, a branch).
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.queries import buffers_written, declared_names, written_names
from polypy.poly.paths import StmtPath, child_blocks, iter_statements

Point = StmtPath


@dataclasses.dataclass(frozen=True)
class Def:
    """``v`` holds the value ``value`` computed right before the statement at ``path``."""

    path: StmtPath
    value: n.Expr


@dataclasses.dataclass(frozen=True)
class IterStart:
    """``v`` holds what it held at the start of the current iteration of the loop at ``loop``."""

    loop: StmtPath


@dataclasses.dataclass(frozen=True)
class Entry:
    """No assignment before: a parameter's value, or an uninitialized local."""


@dataclasses.dataclass(frozen=True)
class Ambiguous:
    """Several assignments may reach (a branch or a compound statement assigns ``v``)."""

    path: StmtPath


ReachingDef = Def | IterStart | Entry | Ambiguous


def _own_writes(s: n.Stmt) -> set[str]:
    if isinstance(s, (n.Assign, n.Decl)):
        return {s.name}
    if isinstance(s, (n.Shuffle, n.Vote)):
        return {s.dest}
    if isinstance(s, n.AtomicRMW) and s.dest is not None:
        return {s.dest}
    if isinstance(s, n.For):
        return {s.var}
    return set()


class Program:
    """Indexes over one (normalized) kernel."""

    def __init__(self, kernel: n.Kernel):
        self.kernel = kernel
        self.stmts: dict[StmtPath, n.Stmt] = {}
        self.writers: dict[str, list[StmtPath]] = {}
        self.decl: dict[str, StmtPath] = {}
        # Each statement numbered (``ids``), with its parent's number (-1: the kernel's body),
        # its last step (field, index) and whether it is a loop: climbing from a statement to the
        # top without slicing paths (``_Writers``).
        self.ids: dict[StmtPath, int] = {}
        self.parent: list[int] = []
        self.step: list[tuple[str, int]] = []
        self.is_loop: list[bool] = []
        for path, s in iter_statements(kernel.body):
            self.stmts[path] = s
            self.ids[path] = len(self.parent)
            self.parent.append(self.ids[path[:-1]] if len(path) > 1 else -1)
            self.step.append(path[-1])
            self.is_loop.append(isinstance(s, (n.For, n.While)))
            for v in _own_writes(s):
                self.writers.setdefault(v, []).append(path)
            if isinstance(s, n.Decl):
                self.decl[s.name] = path
            elif isinstance(s, n.For):
                self.decl[s.var] = path
        self._written_in: dict[StmtPath, frozenset[str]] = {}
        self._later_writes: dict[str, _Writers] = {}
        self.written_buffers = buffers_written(kernel.body)
        self.params = {p.name for p in kernel.params}

    # ------------------------------------------------------------------ structure
    def block(self, parent: StmtPath, field: str) -> tuple[n.Stmt, ...]:
        if not parent:
            return self.kernel.body
        return dict(child_blocks(self.stmts[parent]))[field]

    def stmt(self, path: StmtPath) -> n.Stmt:
        return self.stmts[path]

    def loops_around(self, point: Point) -> list[StmtPath]:
        """Paths of the loops enclosing ``point``, outermost first."""
        out = []
        for k in range(1, len(point)):
            if isinstance(self.stmts[point[:k]], (n.For, n.While)):
                out.append(point[:k])
        return out

    def written_in(self, path: StmtPath) -> frozenset[str]:
        """Variables assigned or declared anywhere inside the statement at ``path``."""
        got = self._written_in.get(path)
        if got is None:
            s = self.stmts[path]
            got = frozenset(written_names(s) | declared_names(s))  # remembered in the statements
            self._written_in[path] = got
        return got

    def writes_var(self, path: StmtPath, v: str) -> bool:
        return v in self.written_in(path)

    def is_top_level(self, name: str) -> bool:
        path = self.decl.get(name)
        return path is not None and len(path) == 1

    # ------------------------------------------------------------------ order
    def may_execute_after(self, w: StmtPath, p: Point) -> bool:
        """Can (an instance of) the statement at ``w`` run after point ``p``?"""
        c = 0
        while c < len(w) and c < len(p) and w[c] == p[c]:
            c += 1
        for k in range(1, c + 1):
            if k < len(w) and k < len(p) and isinstance(self.stmts.get(w[:k]), (n.For, n.While)):
                return True  # both inside one loop: its next iteration runs w again
        if c == len(p) or c == len(w):
            return True  # w is (inside) the statement at p, or encloses p
        (fw, iw), (fp, ip) = w[c], p[c]
        if fw == fp:
            return iw > ip
        return False  # then/orelse of one if: exclusive

    def overwritten_after(self, v: str, p: Point) -> bool:
        """Whether ``may_execute_after(w, p)`` for a writer ``w`` of ``v``: asked of each writer,
        the question took time writers x depth at every point (1,000 nested ``if``s assigning
        one variable: cubic), so each variable's writers are indexed once (``_Writers``) and the
        question climbs from ``p`` to the top, a constant number of lookups per level."""
        index = self._later_writes.get(v)
        if index is None:
            index = self._later_writes[v] = _Writers(self.writers.get(v, ()), self)
        return index.after(p, self)

    def reaching_def(self, v: str, p: Point) -> ReachingDef:
        path = p
        while True:
            parent, (field, index) = path[:-1], path[-1]
            block = self.block(parent, field)
            for j in range(index - 1, -1, -1):
                s = block[j]
                sp = parent + ((field, j),)
                if not self.writes_var(sp, v):
                    continue
                if isinstance(s, n.Assign) and s.name == v:
                    return Def(sp, s.value)
                if isinstance(s, n.Decl) and s.name == v:
                    return Def(sp, s.init) if s.init is not None else Entry()
                return Ambiguous(sp)
            if not parent:
                return Entry()
            enclosing = self.stmts[parent]
            if isinstance(enclosing, (n.For, n.While)) and self.writes_var(parent, v):
                return IterStart(parent)
            path = parent

    def top_index(self, loop: StmtPath, p: Point) -> int:
        """Index in the loop's body of the top-level statement containing point ``p``."""
        return p[len(loop)][1]


class _Writers:
    """The writers of one variable, indexed for ``Program.overwritten_after``. With ``w`` a
    writer and ``p`` a point, ``may_execute_after(w, p)`` holds when

    * ``w`` is the statement at ``p``, inside it, or encloses ``p`` (``inside``, ``writers``);
    * a loop enclosing ``p`` also holds ``w`` strictly inside (``loops``: its next iteration);
    * ``w`` is in a later statement of a block that holds ``p`` at some level (``later``: per
      block, the largest index of a statement holding a writer).

    Built climbing from each writer to the top, stopping where an earlier writer's climb
    passed: each statement is visited once."""

    def __init__(self, writers, prog: Program):
        self.writers = {prog.ids[w] for w in writers}
        self.inside: set[int] = set()  # statements that are or hold a writer
        self.strictly: set[int] = set()  # statements that hold a writer below themselves
        self.later: dict[tuple[int, str], int] = {}  # (parent, field) -> largest index holding a writer
        for w in self.writers:
            node, below = w, False
            while node >= 0:
                if below:
                    self.strictly.add(node)
                if node in self.inside:
                    break
                self.inside.add(node)
                field, index = prog.step[node]
                key = (prog.parent[node], field)
                if self.later.get(key, -1) < index:
                    self.later[key] = index
                node, below = prog.parent[node], True

    def after(self, p: Point, prog: Program) -> bool:
        here = prog.ids.get(p)
        if here is not None and here in self.inside:
            return True  # a writer is the statement at p or inside it
        field, index = p[-1]
        node = prog.ids[p[:-1]] if len(p) > 1 else -1
        while True:
            if self.later.get((node, field), -1) > index:
                return True  # a writer later in the block holding p at this level
            if node < 0:
                return False
            if node in self.writers or (prog.is_loop[node] and node in self.strictly):
                return True  # a writer encloses p, or a loop around p holds one
            field, index = prog.step[node]
            node = prog.parent[node]


def point_after(path: StmtPath) -> Point:
    """The point right after the statement at ``path``."""
    field, index = path[-1]
    return path[:-1] + ((field, index + 1),)


def body_start(loop: StmtPath) -> Point:
    return loop + (("body", 0),)
