"""The interchanged loop nest of ``sink_thread_loops``: building it from the plan's decisions.

``_Plan`` (in ``gpu2cpu.sink_thread_loops``) decides which serial loops go outside the loop over
tx and which locals are hoisted. ``SunkNest`` cuts the body into the parts that stay outside
the loops over tx (sunk loops, uniform ifs, jumps, hoisted writes: ``_Structure``) and the runs
of statements that each become one loop over tx (``_Piece``), decides how each local used by
several parts crosses between them (recomputed in each part, or kept per thread in a buffer,
possibly the per-thread slot it came from), and renders the new statements.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Union

from gpu2cpu.thread_loops import CHEAP_CALLS, RECOMPUTE_LIMIT, stem_of, thread_loop
from polypy.ir import nodes as n
from polypy.ir.queries import declared_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import U32
from polypy.ir.visitor import iter_children, walk, walk_only

if TYPE_CHECKING:
    from gpu2cpu.sink_thread_loops import _Plan


@dataclasses.dataclass
class _Piece:
    """A run of statements that becomes one loop over tx."""

    stmts: list[n.Stmt]
    loops: tuple[int, ...]  # ids of the sunk loops around it (for recomputation rules)


@dataclasses.dataclass
class _Structure:
    """A statement kept outside the loops over tx: a sunk loop, a uniform if, a jump, a hoisted write."""

    stmt: n.Stmt
    children: list[list[_Node]]  # sunk loop: [body] or [body, update]; if: [then, else]


_Node = Union[_Piece, _Structure]


class SunkNest:
    """The new statements for ``plan`` (``emit``); the per-thread buffers it adds go to
    ``plan.sink.buffers``, its decision to ``plan.sink``'s report."""

    def __init__(self, plan: _Plan):
        self.plan = plan
        self.types: dict[str, object] = {}
        self.cross: set[str] = set()
        self.recomputed: dict[str, n.Expr] = {}
        self.expanded: set[str] = set()
        self.storage: dict[str, tuple[str, tuple[n.Expr, ...]]] = {}
        self.slot_stmts: set[int] = set()  # the slot's initial load and final store: not needed twice

    def tree(self, stmts: tuple[n.Stmt, ...], loops: tuple[int, ...], in_loop: bool) -> list[_Node]:
        """``stmts`` cut into runs of statements (``_Piece``) and the statements kept outside the
        loops over tx (``_Structure``). Not a Mutator: it groups siblings into runs, and what it
        enters (sunk loops, structural ifs) depends on the plan."""
        out: list[_Node] = []
        run: list[n.Stmt] = []

        def flush() -> None:
            if run:
                out.append(_Piece(list(run), loops))
                run.clear()

        for s in stmts:
            if id(s) in self.plan.sunk:
                flush()
                inner = loops + (id(s),)
                if isinstance(s, n.For):
                    out.append(_Structure(s, [self.tree(s.body, inner, True)]))
                else:
                    assert isinstance(s, n.While)
                    out.append(_Structure(s, [self.tree(s.body, inner, True), [_Structure(u, []) for u in s.update]]))
            elif isinstance(s, n.If) and self.plan.structural_if(s, in_loop):
                flush()
                out.append(_Structure(s, [self.tree(s.then, loops, in_loop), self.tree(s.orelse, loops, in_loop)]))
            elif isinstance(s, (n.Break, n.Continue)) and in_loop or isinstance(s, (n.Decl, n.Assign)) and s.name in self.plan.hoisted:
                flush()
                out.append(_Structure(s, []))
            else:
                run.append(s)
        flush()
        return out

    def emit(self) -> list[n.Stmt]:
        root = self.tree(self.plan.loop.body, (), False)
        pieces: list[_Piece] = []
        _collect(root, pieces)
        self.classify(root, pieces)
        body = self.render(root)
        loops = [s for s in walk(self.plan.loop) if id(s) in self.plan.sunk]
        described = ", ".join(f"'{getattr(s, 'var', 'while')}'" for s in loops)
        expanded = ", ".join(f"'{v}'" for v in sorted(self.expanded))
        recomputed = ", ".join(f"'{v}'" for v in sorted(self.recomputed))
        message = f"thread loop over {self.plan.t}: interchanged with the serial loop(s) {described}, {self.plan.t} innermost " \
                  f"({len(pieces)} loop(s) over {self.plan.t})"
        orders = [choice for loop, choice in self.plan.orders.values() if id(loop) in self.plan.sunk]
        if orders:
            message += "; " + "; ".join(f"{self.plan.t} innermost in '{c.loop_var}': {c.reason()}" for c in orders)
        if self.plan.hoisted:
            message += f"; {', '.join(repr(v) for v in sorted(self.plan.hoisted))} computed once (the same in every thread)"
        if recomputed:
            message += f"; {recomputed} recomputed in each part"
        if expanded:
            message += f"; {expanded} kept per thread in " + ", ".join(
                f"{self.storage[v][0]}[...]" for v in sorted(self.expanded))
        self.plan.sink.note(self.plan.loop, message)
        if not self.plan.full_range:  # hoisted code must not run when no thread does
            cond = n.Binary("lt", self.plan.loop.start, self.plan.loop.stop)
            return [n.If(cond, tuple(body), loc=self.plan.loop.loc)]
        return body

    # -- locals across parts
    def classify(self, root: list[_Node], pieces: list[_Piece]) -> None:
        users: dict[str, set[int]] = {}
        for k, p in enumerate(pieces):
            for s in p.stmts:
                for x in walk(s):
                    name = _name_of(x)
                    if name is not None and name in self.plan.declared and name not in self.plan.hoisted:
                        users.setdefault(name, set()).add(k)
        decl_piece: dict[str, int] = {}
        for k, p in enumerate(pieces):
            for s in p.stmts:
                for x in walk(s):
                    if isinstance(x, n.Decl):
                        decl_piece.setdefault(x.name, k)
                    elif isinstance(x, n.For):
                        decl_piece.setdefault(x.var, k)
        types = {x.name: x.vtype for x in walk(self.plan.loop) if isinstance(x, n.Decl)}
        self.types = types
        sunk_vars = {x.var for x in walk(self.plan.loop) if isinstance(x, n.For) and id(x) in self.plan.sunk}
        self.cross = {v for v, ks in users.items()
                      if (len(ks) > 1 or decl_piece.get(v) not in ks) and v not in sunk_vars}
        lets = self.stable_lets(pieces)

        def operands(v: str) -> set[str]:
            return {x.name for x in walk(lets[v]) if isinstance(x, n.Var) and (x.name in lets or x.name in self.cross)}

        def closure(roots: set[str]) -> set[str]:
            out, todo = set(), list(roots)
            while todo:
                v = todo.pop()
                if v not in out:
                    out.add(v)
                    todo.extend(operands(v) & set(lets))
            return out

        # A local that crosses parts and is a stable let is recomputed in each part that uses it,
        # and so are the stable lets it reads (they may be declared in one part only) ...
        recomputed = closure({v for v in lets if v in self.cross})
        # ... unless it reads a value kept per thread: then it is kept per thread too.
        changed = True
        while changed:
            changed = False
            for v in sorted(recomputed):
                if operands(v) - recomputed:
                    recomputed.discard(v)
                    changed = True
        recomputed = closure({v for v in recomputed if v in self.cross})
        # In definition order (``lets`` is in program order): each part declares them in this
        # order, operands first, the same on every run.
        self.recomputed = {v: e for v, e in lets.items() if v in recomputed}
        self.expanded = self.cross - set(self.recomputed)
        self.storage: dict[str, tuple[str, tuple[n.Expr, ...]]] = {}
        self.slot_stmts: set[int] = set()  # the slot's initial load and final store: not needed twice
        for v in sorted(self.expanded):
            self.storage[v] = self.slot_storage(v) or self.new_storage(v)

    def stable_lets(self, pieces: list[_Piece]) -> dict[str, n.Expr]:
        """Locals written once, at the top of a part, by a cheap expression of values that do not
        change while the loop runs (tx, names from outside, sunk loop variables, memory the loop
        does not write, other such locals)."""
        writes: dict[str, int] = {}
        for x in walk(self.plan.loop):
            name = None
            if isinstance(x, n.Decl):
                name = x.name if x.init is not None else None
            elif isinstance(x, n.Assign):
                name = x.name
            elif isinstance(x, n.AtomicRMW):
                name = x.dest
            elif isinstance(x, n.For) and x is not self.plan.loop:
                name = x.var
            if name is not None:
                writes[name] = writes.get(name, 0) + 1
        sunk_vars = {x.var for x in walk(self.plan.loop) if isinstance(x, n.For) and id(x) in self.plan.sunk}
        out: dict[str, n.Expr] = {}
        for p in pieces:
            for s in p.stmts:
                if not (isinstance(s, n.Decl) and s.init is not None and writes.get(s.name) == 1):
                    continue
                if self.thread_cost(s.init) > RECOMPUTE_LIMIT:
                    continue
                ok = True
                for x in walk(s.init):
                    if isinstance(x, n.Var):
                        if not (x.name == self.plan.t or x.name not in self.plan.declared or x.name in out
                                or x.name in sunk_vars):
                            ok = False
                    elif isinstance(x, n.Load) and x.buffer in self.plan.written_buffers or isinstance(x, n.Call) and x.fn not in CHEAP_CALLS or isinstance(x, n.Binary) and x.op in ("div", "rem") and not isinstance(x.b, n.Const):
                        ok = False
                if ok:
                    out[s.name] = s.init
        return out

    def thread_cost(self, e: n.Expr) -> int:
        """What recomputing ``e`` in every part costs: its distinct subexpressions that vary with
        the thread (the compiler computes a repeated one once), an invariant one counting as one
        node (the compiler computes it once, outside the thread loop)."""
        seen: set[n.Expr] = set()

        def cost(x: n.Expr) -> int:
            if x in seen:
                return 0
            seen.add(x)
            if not any(isinstance(y, n.Var) and (y.name == self.plan.t or y.name in self.plan.declared) for y in walk(x)):
                return 1
            return 1 + sum(cost(c) for c in iter_children(x) if isinstance(c, n.Expr))

        return cost(e)

    def slot_storage(self, v: str) -> tuple[str, tuple[n.Expr, ...]] | None:
        """``v`` starts as this thread's slot of a per-thread buffer and goes back there at the end,
        the buffer being used for nothing else here: that slot holds ``v`` between the parts."""
        body = self.plan.loop.body
        decl = next((s for s in body if isinstance(s, n.Decl) and s.name == v), None)
        if decl is None or not isinstance(decl.init, n.Load):
            return None
        load = decl.init
        if self.plan.kernel.space(load.buffer) != "local" or len(load.index) != 3:
            return None
        counters = [e.var for e in self.plan.sink.enclosing[-2:]]
        if [i for i in load.index] != [n.Var(c, U32) for c in counters] + [n.Var(self.plan.t, U32)]:
            return None
        store_ok = False
        stores: list[n.Stmt] = []
        for x in walk(self.plan.loop):
            if x is load:
                continue
            if isinstance(x, n.Load) and x.buffer == load.buffer:
                return None
            if isinstance(x, (n.Store, n.AtomicRMW)) and x.buffer == load.buffer:
                if not (isinstance(x, n.Store) and x.index == load.index and x.value == n.Var(v, decl.vtype)
                        and x in body):
                    return None
                later = body[body.index(x) + 1:]
                if any(isinstance(y, (n.Assign, n.Decl)) and y.name == v for s in later for y in walk(s)):
                    return None
                store_ok = True
                stores.append(x)
        if not store_ok:
            return None
        self.slot_stmts.update(id(x) for x in stores)
        self.slot_stmts.add(id(decl))
        return load.buffer, load.index

    def new_storage(self, v: str) -> tuple[str, tuple[n.Expr, ...]]:
        name = self.plan.sink.names.fresh(f"{v}_x")
        self.plan.sink.buffers.append(n.Buffer(name, self.types[v], (n.BlockDim(0),), "local", loc=self.plan.loop.loc))
        return name, (n.Var(self.plan.t, U32),)

    # -- rendering
    def render(self, nodes: list[_Node]) -> list[n.Stmt]:
        out: list[n.Stmt] = []
        for node in nodes:
            if isinstance(node, _Piece):
                loop = self.piece(node)
                if loop is not None:
                    out.append(loop)
                continue
            s = node.stmt
            if isinstance(s, n.For) and id(s) in self.plan.sunk:
                out.append(dataclasses.replace(s, body=tuple(self.render(node.children[0]))))
            elif isinstance(s, n.While):
                out.append(dataclasses.replace(s, body=tuple(self.render(node.children[0])),
                                               update=tuple(self.render(node.children[1]))))
            elif isinstance(s, n.If):
                out.append(dataclasses.replace(s, then=tuple(self.render(node.children[0])),
                                               orelse=tuple(self.render(node.children[1]))))
            else:
                out.append(s)
        return out

    def piece(self, p: _Piece) -> n.Stmt | None:
        """The loop over tx of one part (None when nothing is left to run in it)."""
        names = self.plan.sink.names
        counter = names.fresh("tx")
        # The final store of a value kept in its own slot writes what the slot already holds.
        stmts = tuple(s for s in p.stmts if not (isinstance(s, n.Store) and id(s) in self.slot_stmts))
        if not stmts:
            return None
        mentioned = {x for s in stmts for x in _names(s)}
        declared_here = declared_names(stmts)
        mapping = {self.plan.t: counter}
        prologue: list[n.Stmt] = []
        epilogue: list[n.Stmt] = []
        # Recomputed values, in definition order (operands first).
        needed = {v for v in self.recomputed if v in mentioned and v not in declared_here}
        closure = set(needed)
        while True:
            more = {x.name for v in closure for x in walk(self.recomputed[v])
                    if isinstance(x, n.Var) and x.name in self.recomputed} - closure
            if not more:
                break
            closure |= more
        bound = {x.name for x in walk_only(self.plan.loop, n.Decl) if x.let}  # a let's copy is a let
        for v in self.recomputed:
            if v in closure:
                local = names.fresh(stem_of(v))
                mapping[v] = local
                prologue.append(n.Decl(local, self.types[v], self.recomputed[v], let=v in bound,
                                       loc=self.plan.loop.loc))
        for v in sorted(self.expanded & mentioned):
            buf, index = self.storage[v]
            ty = self.types[v]
            if v not in declared_here:
                local = names.fresh(stem_of(v))
                mapping[v] = local
                read_first, certainly_written = _first_access(stmts, v)
                # Loaded when the part may read it first, or may store it back without having
                # written it (a write under an if: the other threads' paths keep the old value).
                stored_back = _writes(stmts, v, skip=self.slot_stmts)
                init = n.Load(buf, index, ty) if read_first or (stored_back and not certainly_written) else None
                prologue.append(n.Decl(local, ty, init, loc=self.plan.loop.loc))
            if _writes(stmts, v, skip=self.slot_stmts):
                epilogue.append(n.Store(buf, index, n.Var(v, ty), loc=self.plan.loop.loc))
        if (prologue or epilogue) and len(stmts) == 1 and isinstance(stmts[0], n.If) and not stmts[0].orelse \
                and not (_names_of_expr(stmts[0].cond) & (self.expanded | set(self.recomputed))):
            # A guarded part: move the copies in and out under the guard (threads that skip it
            # change nothing, and the guard can become the loop's bounds).
            guard = stmts[0]
            body = (dataclasses.replace(guard, then=tuple(prologue) + guard.then + tuple(epilogue)),)
        else:
            body = tuple(prologue) + stmts + tuple(epilogue)
        # Locals declared in this part keep their names; the others' copies get fresh ones.
        body = rename_locals(body, mapping)
        return thread_loop(counter, self.plan.loop.start, self.plan.loop.stop, body, self.plan.loop.loc)



def _collect(nodes: list[_Node], out: list[_Piece]) -> None:
    for node in nodes:
        if isinstance(node, _Piece):
            out.append(node)
        else:
            for child in node.children:
                _collect(child, out)


def _name_of(x: n.Node) -> str | None:
    if isinstance(x, n.Var):
        return x.name
    if isinstance(x, (n.Decl, n.Assign)):
        return x.name
    if isinstance(x, n.AtomicRMW):
        return x.dest
    return None


def _names_of_expr(e: n.Expr) -> set[str]:
    return {x.name for x in walk(e) if isinstance(x, n.Var)}


def _names(s: n.Stmt) -> set[str]:
    return {name for x in walk(s) if (name := _name_of(x)) is not None}


def _writes(stmts: tuple[n.Stmt, ...], v: str, skip: set[int] = frozenset()) -> bool:  # type: ignore[assignment]
    for s in stmts:
        for x in walk(s):
            if isinstance(x, (n.Decl, n.Assign)) and x.name == v and id(x) not in skip:
                return True
            if isinstance(x, n.AtomicRMW) and x.dest == v:
                return True
    return False


def _first_access(stmts: tuple[n.Stmt, ...], v: str) -> tuple[bool, bool]:
    """Whether ``v`` may be read in ``stmts`` before it is certainly written, and whether
    ``stmts`` certainly write it (on every path, before any read)."""
    def reads(node: n.Node | None) -> bool:
        return node is not None and any(isinstance(x, n.Var) and x.name == v for x in walk(node))

    def seq(ss: tuple[n.Stmt, ...]) -> tuple[bool, bool]:  # (read first, certainly written)
        for s in ss:
            if isinstance(s, n.Decl):
                if reads(s.init):
                    return True, False
                if s.name == v and s.init is not None:
                    return False, True
            elif isinstance(s, n.Assign):
                if reads(s.value):
                    return True, False
                if s.name == v:
                    return False, True
            elif isinstance(s, n.If):
                if reads(s.cond):
                    return True, False
                r1, w1 = seq(s.then)
                r2, w2 = seq(s.orelse)
                if r1 or r2:
                    return True, False
                if w1 and w2:
                    return False, True
            elif isinstance(s, (n.For, n.While)):
                if reads(s):
                    return True, False
            elif reads(s):
                return True, False
        return False, False

    return seq(stmts)
