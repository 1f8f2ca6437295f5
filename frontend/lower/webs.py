"""One IR variable per *web* of a C variable: a local reused for unrelated values gets a name per use.

C code often declares a counter once and reuses it (Rodinia's srad reduction)::

    int i;                                   var i: i32
    for (i = 2; i <= N; i = 2 * i) {         var i_1: i32
      ...; __syncthreads();           ==>    i = 2; while (i <= N) { ...; barrier; i = 2 * i }
    }                                        if (tx == N - 1) {
    if (tx == N - 1)                           i_1 = bx * N; while (i_1 < ...) { ...; i_1 = i_1 + 1 }
      for (i = bx * N; ...; i++) ...         }

The second loop runs under thread-dependent control, so it makes ``i`` thread-dependent; every
question about uniformity is asked per name, so the first loop, whose barrier every thread
reaches, looked thread-dependent too. No value flows from one loop into the other: the uses of
each definition (reaching definitions over the structured IR) form separate webs, and giving each
web its own name changes nothing in what the kernel computes.

``split_variable_webs`` requires unique declarations (one ``Decl`` per name, as the frontend
emits them); names also written by atomics, shuffles or votes are left alone. A kernel whose
loops nest deeper than ``MAX_LOOP_DEPTH`` keeps every variable whole (exact, only less precise
for the uniformity questions): the reaching definitions' fixed point runs each loop's body again
for every loop around it, which costs the square of the depth (1,000 nested loops: 30 s). The
same beyond ``MAX_BLOCK_DEPTH`` nested statements of any kind: each ``if`` joins the states of its
two branches, a map of every candidate variable, and machine-made input (a ``?:`` of records
nested 3,000 deep: an ``if`` and a temporary per level) has as many candidates as levels.
"""
from __future__ import annotations

from typing import Callable

from polypy.ir import nodes as n
from polypy.ir.queries import loop_depth
from polypy.ir.visitor import Mutator, rebuild, walk, walk_only

MAX_LOOP_DEPTH = 64
MAX_BLOCK_DEPTH = 256

Path = tuple
State = dict[str, frozenset]  # name -> the definitions (paths of Decl/Assign) that may reach here


def _join(a: State | None, b: State | None) -> State | None:
    if a is None:
        return b
    if b is None or a is b:
        return a
    if len(a) < len(b):
        a, b = b, a
    out = dict(a)
    for k, v in b.items():  # the two sides of an ``if`` share most sets: no union for those
        old = out.get(k)
        if old is None:
            out[k] = v
        elif old is not v:
            out[k] = old | v
    return out


def _own_exprs(s: n.Stmt) -> list[n.Expr]:
    """The expressions a statement evaluates itself (not those of its nested blocks)."""
    out: list[n.Expr] = []
    for name in s.CHILDREN:
        if name in s.BLOCKS:
            continue
        v = getattr(s, name)
        if isinstance(v, n.Expr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, n.Expr))
    return out


class _Flow:
    """Reaching definitions of the candidate names; records, per statement, the definitions
    each name it reads may come from."""

    def __init__(self, names: set[str]):
        self.names = names
        self.uses: dict[Path, dict[str, frozenset]] = {}
        self.loops: list[list[State | None]] = []  # per enclosing loop: [at breaks, at continues]

    def use(self, path: Path, exprs: list[n.Expr], state: State) -> None:
        read = {x.name for e in exprs for x in walk(e) if isinstance(x, n.Var) and x.name in self.names}
        if not read:
            return
        at = self.uses.setdefault(path, {})
        for name in read:
            at[name] = at.get(name, frozenset()) | state.get(name, frozenset())

    def block(self, stmts: tuple[n.Stmt, ...], state: State | None, path: Path) -> State | None:
        for i, s in enumerate(stmts):
            if state is None:
                return None  # unreachable (after a break, continue or return)
            state = self.stmt(s, state, path + (i,))
        return state

    def stmt(self, s: n.Stmt, state: State, path: Path) -> State | None:
        self.use(path, _own_exprs(s), state)
        if isinstance(s, (n.Decl, n.Assign)) and s.name in self.names:
            return {**state, s.name: frozenset({path})}
        if isinstance(s, n.If):
            return _join(self.block(s.then, state, path + ("then",)), self.block(s.orelse, state, path + ("orelse",)))
        if isinstance(s, (n.For, n.While)):
            return self.loop(s, state, path)
        if isinstance(s, n.Break):
            self.loops[-1][0] = _join(self.loops[-1][0], state)
            return None
        if isinstance(s, n.Continue):
            self.loops[-1][1] = _join(self.loops[-1][1], state)
            return None
        if isinstance(s, n.Return):
            return None
        return state

    def loop(self, s: n.For | n.While, entry: State, path: Path) -> State | None:
        head: State = entry
        while True:
            jumps: list[State | None] = [None, None]
            self.loops.append(jumps)
            if isinstance(s, n.While):
                self.use(path, [s.cond], head)
            end = self.block(s.body, head, path + ("body",))
            end = _join(end, jumps[1])
            if isinstance(s, n.While):
                end = self.block(s.update, end, path + ("update",))
            self.loops.pop()
            new_head = _join(entry, end)
            assert new_head is not None
            if new_head == head:
                return _join(head, jumps[0])
            head = new_head


class _Rename(Mutator):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Var(self, e: n.Var) -> n.Expr:
        new = self.names.get(e.name)
        return e if new is None else rebuild(e, name=new)


def split_variable_webs(kernel: n.Kernel, fresh: Callable[[str], str]) -> n.Kernel:
    """``kernel`` with each web of a reused local variable under its own name (see the module
    docstring); ``kernel`` itself when no variable has more than one web."""
    decls: dict[str, n.Decl] = {}
    excluded: set[str] = set()
    defs: dict[str, int] = {}
    for x in walk_only(kernel, n.Stmt):
        if isinstance(x, n.Decl):
            if x.name in decls:
                excluded.add(x.name)
            decls[x.name] = x
        elif isinstance(x, (n.AtomicRMW, n.Shuffle, n.Vote)) and x.dest is not None:
            excluded.add(x.dest)
        elif isinstance(x, n.For):
            excluded.add(x.var)
        if isinstance(x, (n.Decl, n.Assign)):
            defs[x.name] = defs.get(x.name, 0) + 1
    names = {name for name in decls if name not in excluded and defs.get(name, 0) > 1}
    if (not names or loop_depth(kernel.body) > MAX_LOOP_DEPTH
            or loop_depth(kernel.body, (n.If, n.For, n.While)) > MAX_BLOCK_DEPTH):
        return kernel
    flow = _Flow(names)
    flow.block(kernel.body, {}, ("body",))
    # Union-find over definitions: the definitions one use may see belong to one web.
    parent: dict[Path, Path] = {}

    def find(p: Path) -> Path:
        while parent.setdefault(p, p) != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    for at in flow.uses.values():
        for reaching in at.values():
            first, *rest = list(reaching) or [None]
            for other in rest:
                parent[find(other)] = find(first)
    seen = {d for at in flow.uses.values() for reaching in at.values() for d in reaching}
    webs = _Webs(names, find, seen)
    rewritten = webs.block(kernel.body, ("body",), flow.uses, fresh)
    if not webs.renamed:
        return kernel
    return rebuild(kernel, body=rewritten)


class _Webs:
    """The rewrite: definitions and uses renamed by web, declarations added for the new names."""

    def __init__(self, names: set[str], find: Callable[[Path], Path], seen: set[Path]):
        self.names = names
        self.find = find
        self.seen = seen  # definitions some use may see (the others are dead)
        self.web_names: dict[tuple[str, Path], str] = {}
        self.taken: set[str] = set()  # web_names' values (asked per use: a set, not a scan)
        self.decl_webs: dict[str, Path] = {}
        self.renamed: dict[str, list[str]] = {}  # original name -> the new names of its other webs
        self.fresh: Callable[[str], str] = lambda s: s

    def name_of(self, name: str, definition: Path) -> str:
        root = self.find(definition)
        key = (name, root)
        if key not in self.web_names:
            if self.decl_webs.get(name) == root:
                self.web_names[key] = name
            elif self.decl_webs.get(name) is None and name not in self.taken:
                self.web_names[key] = name  # the declaration's own value is never used: first web
            else:
                self.web_names[key] = self.fresh(name)
                self.renamed.setdefault(name, []).append(self.web_names[key])
            self.taken.add(self.web_names[key])
        return self.web_names[key]

    def block(self, stmts: tuple[n.Stmt, ...], path: Path, uses, fresh) -> tuple[n.Stmt, ...]:
        self.fresh = fresh
        out: list[n.Stmt] = []
        for i, s in enumerate(stmts):
            p = path + (i,)
            if isinstance(s, n.Decl) and s.name in self.names:
                self.decl_webs[s.name] = self.find(p) if p in self.seen else None
            mapping = {name: self.name_of(name, next(iter(defs))) for name, defs in uses.get(p, {}).items() if defs}
            mapping = {k: v for k, v in mapping.items() if k != v}
            new = s
            if mapping:
                renamer = _Rename(mapping)
                changes = {}
                for field in s.CHILDREN:
                    if field in s.BLOCKS:
                        continue
                    v = getattr(s, field)
                    if isinstance(v, n.Expr):
                        changes[field] = renamer.visit(v)
                    elif isinstance(v, tuple):
                        changes[field] = renamer.visit_tuple(v)
                new = rebuild(s, **changes)
            if isinstance(new, n.Assign) and new.name in self.names:
                new = rebuild(new, name=self.name_of(new.name, p))
            blocks = {field: self.block(getattr(new, field), p + (field,), uses, fresh) for field in new.BLOCKS}
            new = rebuild(new, **blocks)
            out.append(new)
            if isinstance(s, n.Decl) and s.name in self.names:
                out.append(_Later(s))  # the declarations of its other webs, once they are known
        return tuple(x for s in out for x in self.expand(s))

    def expand(self, s):
        if not isinstance(s, _Later):
            return (s,)
        return tuple(n.Decl(new, s.decl.vtype, None, loc=s.decl.loc) for new in self.renamed.get(s.decl.name, ()))


class _Later:
    """Placeholder after a declaration, replaced by the declarations of the variable's other webs."""

    def __init__(self, decl: n.Decl):
        self.decl = decl
