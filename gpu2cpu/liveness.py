"""Which per-thread values are live from one thread-loop group into another.

After ``gpu2cpu.regions`` has split a kernel into groups, a thread variable that a group reads
before writing it, while an earlier group (in the same or an earlier iteration of a block-level
loop) wrote it, must survive between the two thread loops: it is kept in a per-thread buffer
or recomputed. Everything else stays a plain local of its thread loop.

This is classic backward liveness over the structure: groups are the basic blocks, block-level
``if``/loops the control flow (loops to a fixed point, ``break``/``continue`` to the loop exit
and head). Facts per group:

* ``upward``: variables read before the group definitely writes them;
* ``kill``: variables the group definitely writes. A group in a predicated region writes
  nothing definitely (inactive threads keep their values), except what it declares: a
  declaration starts a new variable, whose old value nobody can read.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.visitor import walk_only

from gpu2cpu.regions import BlockStmt, Group, Item, SFor, SIf, SWhile


@dataclasses.dataclass
class GroupFacts:
    refs: set[str]  # thread variables the group mentions
    declared: set[str]  # thread variables declared at the group's top level
    written: set[str]  # thread variables the group may write
    upward: set[str]
    kill: set[str]
    live_in: set[str] = dataclasses.field(default_factory=set)
    live_out: set[str] = dataclasses.field(default_factory=set)


def _reads(node: n.Node, universe: frozenset[str]) -> set[str]:
    return {x.name for x in walk_only(node, n.Var) if x.name in universe}


def _upward(stmts, defined: set[str], universe: frozenset[str]) -> tuple[set[str], set[str]]:
    """(variables read before being definitely written in ``stmts``, variables written after them).

    Branches define what both define; loop bodies may not run, so they define nothing outside.
    (A dataflow over statements in order, merging the two branches of an ``if``: not a Mutator,
    which sees one node at a time and no order between siblings' effects.)
    """
    upward: set[str] = set()
    defined = set(defined)

    def reads(node: n.Node | None) -> set[str]:
        return set() if node is None else _reads(node, universe) - defined

    for s in stmts:
        if isinstance(s, n.Decl):
            upward |= reads(s.init)
            defined.add(s.name)
        elif isinstance(s, n.Assign):
            upward |= reads(s.value)
            defined.add(s.name)
        elif isinstance(s, n.If):
            upward |= reads(s.cond)
            up_then, def_then = _upward(s.then, defined, universe)
            up_else, def_else = _upward(s.orelse, defined, universe)
            upward |= up_then | up_else
            defined = def_then & def_else
        elif isinstance(s, n.For):
            upward |= reads(s.start) | reads(s.stop) | reads(s.step)
            upward |= _upward(s.body, defined | {s.var}, universe)[0]
        elif isinstance(s, n.While):
            upward |= reads(s.cond)
            upward |= _upward(s.body + s.update, defined, universe)[0]
        else:
            upward |= reads(s)
            if isinstance(s, n.AtomicRMW) and s.dest is not None:
                defined.add(s.dest)
    return upward, defined


def group_facts(g: Group, universe: frozenset[str]) -> GroupFacts:
    refs: set[str] = set()
    written: set[str] = set()
    for s in g.stmts + g.otherwise:
        for x in walk_only(s, n.Var, n.Stmt):
            if isinstance(x, n.Var) and x.name in universe:
                refs.add(x.name)
            elif isinstance(x, (n.Decl, n.Assign)) and x.name in universe:
                refs.add(x.name)
                written.add(x.name)
            elif isinstance(x, n.For) and x.var in universe:
                refs.add(x.var)
                written.add(x.var)
            elif isinstance(x, n.AtomicRMW) and x.dest is not None and x.dest in universe:
                refs.add(x.dest)
                written.add(x.dest)
    declared = {s.name for s in g.stmts if isinstance(s, n.Decl) and s.name in universe}
    upward, defined = _upward(g.stmts, set(), universe)
    upward |= _upward(g.otherwise, set(), universe)[0]
    kill = declared if g.mask is not None else defined & universe
    return GroupFacts(refs, declared, written, upward, kill)


@dataclasses.dataclass(frozen=True)
class _Jumps:
    exit: frozenset[str]  # live where `break` goes
    head: frozenset[str]  # live where `continue` goes


def analyze(items: list[Item], universe: frozenset[str], extra_reads: frozenset[str] = frozenset()
            ) -> dict[int, GroupFacts]:
    """Facts (with ``live_in``/``live_out``) of every group under ``items``, keyed by ``id(group)``.

    ``extra_reads``: thread variables that block-level code reads (thread 0's copy).
    """
    facts: dict[int, GroupFacts] = {}
    reads_at_block = universe & extra_reads

    def block_reads(node: n.Node) -> set[str]:
        return _reads(node, reads_at_block)

    def seq(items: list[Item], live: set[str], jumps: _Jumps | None) -> set[str]:
        for item in reversed(items):
            live = one(item, live, jumps)
        return live

    def one(item: Item, live: set[str], jumps: _Jumps | None) -> set[str]:
        if isinstance(item, Group):
            f = facts.get(id(item))
            if f is None:
                f = facts[id(item)] = group_facts(item, universe)
            f.live_out = set(live)
            f.live_in = f.upward | (live - f.kill)
            return set(f.live_in)
        if isinstance(item, BlockStmt):
            s = item.stmt
            if isinstance(s, n.Break) and jumps is not None:
                return set(jumps.exit)
            if isinstance(s, n.Continue) and jumps is not None:
                return set(jumps.head)
            return live | block_reads(s)
        if isinstance(item, SIf):
            return block_reads(item.cond) | seq(item.then, live, jumps) | seq(item.orelse, live, jumps)
        if isinstance(item, SFor):
            header = item.loop
            bounds = block_reads(header.start) | block_reads(header.stop) | block_reads(header.step)
            head: set[str] = set()
            while True:
                body_in = seq(item.body, head, _Jumps(frozenset(live), frozenset(head)))
                new_head = live | body_in | bounds
                if new_head == head:
                    return new_head
                head = new_head
        if isinstance(item, SWhile):
            cond = block_reads(item.loop.cond)
            head = set()
            while True:
                loop_jumps = _Jumps(frozenset(live), frozenset(head))
                update_in = seq(item.update, head, loop_jumps)
                body_in = seq(item.body, update_in, _Jumps(frozenset(live), frozenset(update_in)))
                new_head = live | body_in | cond
                if new_head == head:
                    return new_head
                head = new_head
        raise TypeError(type(item).__name__)

    seq(items, set(), None)
    return facts
