"""What makes the emitted C read like code a person wrote (issue 15, item 8).

The renderer (``codegen.c.render``) prints the CPU form faithfully; this module picks the names
and notes that it adds on top, without changing what the code computes:

* **numbered thread counters**: each nest of thread loops in a block function gets its own
  counters, ``tz/ty/tx`` in the first nest, ``tz1/ty1/tx1`` in the second, ``tx2``... (the
  lowering names them ``tx``, ``tx_1``, ``tx_6`` as it invents them, in no order a reader can
  follow); the ``// file:line (threads, nest N)`` comment before each nest gives its number;
* **the overflow test named once**: the lowering's fast thread loops compute indices in 64 bits
  and are exact only when the block's indices fit in 32 bits (``tighten_thread_bounds``,
  step 5); the test ``(i64)... <= 2147483647`` guarding them is repeated before every nest. Each
  distinct test that only reads ``blockIdx``/``blockDim``/``gridDim`` and parameters the kernel
  never assigns is computed once at the top of the block function,
  ``const bool fits_i32 = ...;`` with a comment saying why, and the ``if`` s test the name;
* **removed barriers**: a ``// __syncthreads() removed: <reason>`` comment where the barrier was,
  from the decisions of ``gpu2cpu.barriers.eliminate_barriers`` that the driver passes on
  (objects with ``loc``, ``removed`` and ``reason``; codegen does not import gpu2cpu);
* **named source locals**: ``forward_scalars`` substitutes ``int row = blockIdx.y * 16 + ty;``
  into every use (the polyhedral model needs the expressions) and notes ``(row, i32, value)``
  in ``Kernel.source_locals``. The renderer names the value again: at the top of each innermost
  thread-loop body where the value, in that nest's counters (``threadIdx.y`` -> ``ty1``), occurs,
  ``const int row = (int)(blockIdx.y * 16u + ty1);``, and prints each occurrence as ``row``; a
  value that no thread index enters is named once at the top of the block function. This is
  common-subexpression naming, exact whatever the value meant: the value reads no memory, calls
  nothing but ``min``/``max``/``abs``, divides only by nonzero constants, and reads only names
  that the body neither declares nor writes (so it is the same at the top as where it is used).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from polypy.analysis.barrier_decision import BarrierDecision
from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.queries import conjuncts, written_names
from polypy.ir.types import I64, ScalarType
from polypy.ir.visitor import substitute, walk, walk_only

INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1
_FLAG_NAMES = {INT32_MAX: "fits_i32", UINT32_MAX: "fits_u32"}
_WHAT = {INT32_MAX: "int", UINT32_MAX: "unsigned int"}


@dataclasses.dataclass(frozen=True)
class OverflowFlag:
    """``const bool name = test;``: one run-time overflow test, named."""

    name: str
    test: n.Expr
    type_name: str  # the C type whose range the test checks


@dataclasses.dataclass(frozen=True)
class BarrierNote:
    """One ``__syncthreads()`` of the source as the barrier pass decided it: where, whether it
    was removed, and why."""

    loc: Loc
    removed: bool
    reason: str


def is_overflow_test(e: n.Expr) -> bool:
    """``(i64)... <= 2147483647`` (or ``<= 4294967295``): a check that 32-bit index arithmetic
    does not wrap for this block, as the thread-bound pass builds it."""
    return (isinstance(e, n.Binary) and e.op == "le" and isinstance(e.b, n.Const) and e.b.type == I64
            and e.a.type == I64 and int(e.b.value) in _FLAG_NAMES)


def overflow_flags(kernel: n.Kernel, taken: set[str]) -> list[OverflowFlag]:
    """The overflow tests of ``kernel``'s ``if`` s that can be computed once per block, in the
    order of their first use, each with a fresh name (added to ``taken``)."""
    written = written_names(kernel.body)
    uniform = {p.name for p in kernel.params} - written
    seen: dict[n.Expr, OverflowFlag] = {}
    for x in walk_only(kernel.body, n.If):
        for atom in conjuncts(x.cond):
            if not is_overflow_test(atom) or atom in seen:
                continue
            if not all(v.name in uniform for v in walk_only(atom, n.Var)):
                continue
            if any(isinstance(v, (n.ThreadIdx, n.Load, n.Call)) for v in walk(atom)):
                continue
            limit = int(atom.b.value)  # type: ignore[attr-defined]
            seen[atom] = OverflowFlag(_fresh(_FLAG_NAMES[limit], taken), atom, _WHAT[limit])
    return list(seen.values())


def barrier_notes(decisions: Sequence[object] | None) -> list[BarrierNote]:
    """The barrier decisions (``BarrierDecision``) among ``decisions`` — a lowering report, which
    also holds other entries — in their order: the order of the barriers in the kernel, one per
    barrier instance (a barrier of an inlined function once per call)."""
    return [BarrierNote(d.loc, d.removed, d.reason) for d in decisions or ()
            if isinstance(d, BarrierDecision) and d.loc is not None]


class BarrierPlacer:
    """Where the comments on removed barriers go: the renderer reports each statement it emits
    outside thread loops (in emission order, with its source location); a barrier goes before
    the first statement after it in the source, following one that came before it. A barrier
    of a function inlined twice fits at two such places: the k-th place gets the k-th decision
    with that location (the barrier pass decides barrier instances in program order)."""

    def __init__(self, notes: Sequence[BarrierNote], start: Loc | None):
        self.by_loc: dict[tuple[str, int, int], list[BarrierNote]] = {}
        for b in notes:
            self.by_loc.setdefault(_key(b.loc), []).append(b)
        self.fits: dict[tuple[str, int, int], int] = {}
        self.last = start
        self.noted: set[int] = set()

    def before(self, loc: Loc | None) -> list[BarrierNote]:
        """The removed barriers to note before a statement at ``loc`` (None: the end of the
        kernel, which takes every removed barrier not noted yet)."""
        out = []
        for key, notes in self.by_loc.items():
            if loc is None:
                fits = self.last is None or key[0] != self.last.file or _key(self.last) < key
            else:
                fits = (self.last is not None and self.last.file == key[0] == loc.file
                        and _key(self.last) < key <= _key(loc))
            if not fits:
                continue
            k = self.fits.get(key, 0)
            self.fits[key] = k + 1
            if k < len(notes) and notes[k].removed and id(notes[k]) not in self.noted:
                self.noted.add(id(notes[k]))
                out.append(notes[k])
        if loc is None:
            out += [b for notes in self.by_loc.values() for b in notes if b.removed and id(b) not in self.noted]
            self.noted.update(id(b) for b in out)
        else:
            self.last = loc
        return sorted(out, key=lambda b: _key(b.loc))


@dataclasses.dataclass(frozen=True)
class NamedLocal:
    """A local of the source that ``forward_scalars`` substituted away: its C name (fresh in the
    block function), type and value (GPU form: ``threadIdx``, not the counters)."""

    name: str
    type: ScalarType
    init: n.Expr

    @property
    def per_thread(self) -> bool:
        return any(isinstance(x, n.ThreadIdx) for x in walk(self.init))


def source_local_names(kernel: n.Kernel, taken: set[str]) -> list[NamedLocal]:
    """The notes of ``Kernel.source_locals`` whose values may be named again, in source order,
    each with a fresh C name (added to ``taken``). A name that reads like a thread counter
    (``tx``, ``ty1``) is left out rather than renamed."""
    out = []
    for note in kernel.source_locals:
        if thread_axis(note.name) is not None or _counter_like(note.name) or not _pure(note.init):
            continue
        out.append(NamedLocal(_fresh(note.name, taken), note.vtype, note.init))
    return out


def uniform_source_locals(kernel: n.Kernel, locals_: Sequence[NamedLocal],
                          skip: Sequence[n.Expr] = ()) -> list[NamedLocal]:
    """Those of ``locals_`` that can be named once for the whole block function: no thread index,
    only parameters the kernel never assigns, and used somewhere in ``kernel``'s body."""
    params = {p.name for p in kernel.params} - written_names(kernel.body)
    out = []
    for local in locals_:
        if local.per_thread:
            continue
        if not all(v.name in params for v in walk_only(local.init, n.Var)):
            continue
        if occurs(local.init, kernel.body, skip):
            out.append(local)
    return out


def in_nest(init: n.Expr, counters: dict[int, n.Var]) -> n.Expr | None:
    """``init`` with ``threadIdx.d`` replaced by the nest's counter for ``d`` (as
    ``serialize_threads`` does), or None when the nest has no counter for one of them."""
    dims = {x.dim for x in walk_only(init, n.ThreadIdx)}
    if not dims <= counters.keys():
        return None
    return substitute(init, {n.ThreadIdx(d): counters[d] for d in dims})


def stable_in(e: n.Expr, body: Sequence[n.Stmt]) -> bool:
    """Whether ``e`` has the same value at the top of ``body`` as anywhere in it: ``body``
    neither declares nor writes a name that ``e`` reads."""
    reads = {v.name for v in walk_only(e, n.Var)}
    if not reads:
        return True
    changed = written_names(body)
    for s in body:
        for x in walk_only(s, n.Decl, n.For):
            if isinstance(x, n.Decl):
                changed.add(x.name)
            elif isinstance(x, n.For):
                changed.add(x.var)
    return not (reads & changed)


def occurs(e: n.Expr, body: Sequence[n.Node], skip: Sequence[n.Expr] = ()) -> bool:
    """Whether an expression equal to ``e`` occurs in ``body`` (not counting the inside of the
    expressions in ``skip``, which the renderer prints by another name)."""
    stop = set(skip)
    todo: list[n.Node] = list(body)
    while todo:
        x = todo.pop()
        if isinstance(x, n.Expr):
            if x == e:
                return True
            if x in stop:
                continue
        for name in x.CHILDREN:
            child = getattr(x, name)
            if isinstance(child, tuple):
                todo.extend(c for c in child if c is not None)
            elif child is not None:
                todo.append(child)
    return False


def _pure(e: n.Expr) -> bool:
    """No memory, no calls but integer min/max/abs, no division by a value that may be zero:
    safe to compute ahead of where the source used it."""
    for x in walk(e):
        if isinstance(x, n.Load):
            return False
        if isinstance(x, n.Call) and x.fn not in ("min", "max", "abs"):
            return False
        if isinstance(x, n.Binary) and x.op in ("div", "rem") and not (isinstance(x.b, n.Const) and x.b.value != 0):
            return False
        if not isinstance(x, n.Expr):
            return False
    return True


def _counter_like(name: str) -> bool:
    """``tx``, ``ty1``, ``tz_``: a name the renderer may give a thread counter."""
    rest = name[2:].rstrip("_")
    return name[:2] in ("tx", "ty", "tz") and (rest == "" or rest.isdigit())


def _key(loc: Loc) -> tuple[str, int, int]:
    return (loc.file, loc.line, loc.col)


def thread_axis(var: str) -> str | None:
    """``x``/``y``/``z`` for a thread counter the lowering named (``tx``, ``ty_3``, ``tx_1_2`` for
    a copy of ``tx_1`` in an unrolled loop), else None."""
    stem, *numbers = var.split("_")
    if stem in ("tx", "ty", "tz") and all(x.isdigit() for x in numbers):
        return stem[1]
    return None


def _fresh(base: str, taken: set[str]) -> str:
    name = base
    i = 1
    while name in taken:
        name = f"{base}_{i}"
        i += 1
    taken.add(name)
    return name


fresh_name = _fresh
