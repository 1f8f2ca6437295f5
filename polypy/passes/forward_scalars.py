"""forward_scalars: substitute single-assignment integer locals into their uses.

Requires: unique local names (the frontend guarantees them). Guarantees: same semantics.

``int i = blockIdx.x * blockDim.x + threadIdx.x;`` is replaced at every use by its value, so
every later analysis sees the index expression itself (which the polyhedral model needs to
recognize affine accesses). A local is forwarded when it is

* declared with an initializer and never written again (no ``Assign``, not an atomic or warp
  destination), and
* its value is cheap and stable: integer or bool arithmetic on constants, thread/block
  registers and other never-written names (parameters included), with no loads; or it is a
  plain copy of such a name or a constant, of any type.

A local declared without an initializer whose every assignment stores the same stable value is
forwarded too: Rodinia's lavaMD resets its block-stride counter with ``wtx = tx;`` before each
of its loops, and the loops then read ``threadIdx.x`` itself (a read before any assignment is
an indeterminate value in C, so giving it the value is allowed).

Values that read memory or compute floats are left alone: forwarding them would repeat work
(or read memory at a different time).

Source-named locals are the exception: an integer local of the source with a value worth a
name (``int row = blockIdx.y * 16 + ty;``; not a compiler temporary such as ``p_off``, ``old``,
``cond``, nor a constant, a plain name or a cast of one) stays, as a binding (``let row: i32 =
...``, ``Decl.let``), and its uses read it by name: the emitted code keeps the source's names.
A local that an assignment reads outside a load's index is forwarded all the same (``int W =
tx - 1; W = W < lo ? lo : W;``: the clamp and induction analyses match the assigned value's
form). The analyses that need the expression (affine forms, bounds, isl) look the binding up
(``polypy.ir.queries.let_values``); the passes that rewrite indices rewrite the binding itself
(``gpu2cpu.exact_indices``: ``long long x = ...`` once, not the value in every index).
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.queries import read_names, written_names
from polypy.ir.visitor import Mutator, iter_children, walk, walk_only


def _stable(e: n.Expr, immutable: set[str]) -> bool:
    if isinstance(e, (n.Const, n.GpuIndex)):
        return True
    if isinstance(e, n.Var):
        return e.name in immutable
    if not (e.type.is_int or e.type.is_bool):
        return False
    for x in walk(e):
        if isinstance(x, n.Load):
            return False
        if isinstance(x, n.Call) and x.fn not in ("min", "max", "abs"):
            return False
        if isinstance(x, n.Var) and x.name not in immutable:
            return False
        if isinstance(x, n.Expr) and not (x.type.is_int or x.type.is_bool):
            return False
    return True


class _Forward(Mutator):
    def __init__(self, immutable: set[str], assigned_from: set[str] = frozenset()):
        self.immutable = immutable
        self.assigned_from = assigned_from  # names read by assignments: forwarded (see the docstring)
        self.values: dict[str, n.Expr] = {}

    def visit_Var(self, e: n.Var) -> n.Expr:
        return self.values.get(e.name, e)

    def visit_Assign(self, s: n.Assign) -> n.Stmt | None:
        return None if s.name in self.values else self.generic_visit(s)

    def visit_Decl(self, s: n.Decl) -> n.Stmt | None:
        source = s
        s = self.generic_visit(s)
        if s.init is None and s.name in self.values:  # a reset local (see the module docstring)
            return None
        if s.let:
            return s
        if s.init is not None and s.name in self.immutable and _stable(s.init, self.immutable):
            if _worth_naming(source) and s.name not in self.assigned_from:
                return dataclasses.replace(s, let=True)
            self.values[s.name] = s.init
            return None
        return s


# Bases of the frontend's own temporaries that have an initializer (``frontend.lower``: the
# offset of a local pointer, the old value of a post-increment, a short-circuit condition).
_TEMP_BASES = ("old", "cond")
_TEMP_SUFFIXES = ("_off",)


def _worth_naming(s: n.Decl) -> bool:
    """Whether a forwarded local is a source variable with a value worth a name in emitted code."""
    if s.init is None or s.init.type != s.vtype or s.vtype.name not in ("i32", "u32", "i64", "u64"):
        return False
    stem = s.name
    while "_" in stem and stem.rsplit("_", 1)[1].isdigit():  # acc_1: a renamed `acc`
        stem = stem.rsplit("_", 1)[0]
    if stem in _TEMP_BASES or stem.endswith(_TEMP_SUFFIXES):
        return False
    e = s.init
    while isinstance(e, n.Cast):
        e = e.x
    return not isinstance(e, (n.Const, n.Var, n.GpuIndex))


def _reset_values(kernel: n.Kernel, immutable: set[str]) -> dict[str, n.Expr]:
    """Locals declared without an initializer and written only by assignments of one stable
    value, with that value."""
    values: dict[str, set[n.Expr]] = {}
    other: set[str] = set()
    bare: set[str] = set()  # declared without an initializer (a parameter holds its argument)
    for x in walk_only(kernel, n.Stmt):
        if isinstance(x, n.Assign):
            values.setdefault(x.name, set()).add(x.value)
        elif isinstance(x, (n.AtomicRMW, n.Shuffle, n.Vote)) and x.dest is not None:
            other.add(x.dest)
        elif isinstance(x, n.Decl):
            (bare if x.init is None else other).add(x.name)
    # Names the value may read: in scope at every use, even one ahead of every assignment.
    everywhere = {p.name for p in kernel.params}
    out: dict[str, n.Expr] = {}
    for name, assigned in values.items():
        if name not in bare or name in other or len(assigned) != 1:
            continue
        (value,) = assigned
        if _stable(value, immutable) and read_names(value) <= everywhere:
            out[name] = value
    return out


def _read_by_assignments(kernel: n.Kernel) -> set[str]:
    """The names assignments read, and those the definitions of these read in turn (a value
    forwarded into an assignment is whole: ``W = tx - 1 < lo ? lo : tx - 1`` with ``lo``'s value
    written out)."""
    inits = {x.name: x.init for x in walk_only(kernel, n.Decl) if x.init is not None}
    todo = [name for x in walk_only(kernel, n.Assign) for name in _read_outside_indices(x.value)]
    out: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            if name in inits:
                todo += _read_outside_indices(inits[name])
    return out


def _read_outside_indices(e: n.Expr) -> list[str]:
    """The names ``e`` reads, but for those only inside the index of a load (``acc + s[l + j]``
    reads ``acc``: ``l`` names an index, which stays a let)."""
    if isinstance(e, n.Var):
        return [e.name]
    if isinstance(e, n.Load):
        return []
    return [name for x in iter_children(e) for name in _read_outside_indices(x)]


def forward_scalars(kernel: n.Kernel) -> n.Kernel:
    """Forward stable single-assignment locals (see module docstring)."""
    written = written_names(kernel.body)
    names = {p.name for p in kernel.params}
    for x in walk_only(kernel, n.Decl, n.For):
        if isinstance(x, n.Decl):
            names.add(x.name)
        elif isinstance(x, n.For):
            names.add(x.var)
    immutable = names - written
    assigned_from = _read_by_assignments(kernel)
    out = _Forward(immutable, assigned_from).visit(kernel)
    reset = _reset_values(out, immutable)  # their values as the first round left them
    if reset:
        again = _Forward(immutable)
        again.values.update(reset)
        out = again.visit(out)
    return out
