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
* **source names of bindings**: ``forward_scalars`` keeps ``int row = blockIdx.y * 16 + ty;`` as
  an IR binding (``let row: i32 = ...``, ``Decl.let``), which the lowering copies into each
  thread-loop nest that reads it under a fresh IR name (``row_3``). Each is printed ``const int
  row = ...;`` under the source's name again where no other declaration of that name is in
  scope (``let_names``): the names come from the IR's own bindings, not from the expressions.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from polypy.analysis.barrier_decision import BarrierDecision
from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.queries import conjuncts, written_names
from polypy.ir.types import I64
from polypy.ir.names import kernel_names
from polypy.ir.visitor import walk, walk_only

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


def let_names(kernel: n.Kernel, taken: set[str]) -> dict[str, str]:
    """C names for the lets of ``kernel`` that the lowering renamed (``row_3`` -> ``row``): the
    stem of every let of a stem, where no two declarations of the stem are in scope at once
    (none declared in the block, or a block inside it, of another), no other name of the kernel
    or of ``taken`` is the stem and it does not read like a thread counter. The stems used are
    added to ``taken``."""
    scopes: dict[str, list[tuple[tuple[int, ...], bool]]] = {}  # stem -> (enclosing blocks, let)
    _scopes(kernel.body, (id(kernel.body),), scopes)
    names = kernel_names(kernel)
    out: dict[str, str] = {}
    for stem, decls in sorted(scopes.items()):
        if not all(let for _, let in decls) or not any(_stem(name) != name for name in _named(kernel, stem)):
            continue
        if thread_axis(stem) is not None or _counter_like(stem) or stem in (taken | names) - set(_named(kernel, stem)):
            continue
        chains = [chain for chain, _ in decls]
        if any(a[:len(b)] == b for i, a in enumerate(chains) for j, b in enumerate(chains) if i != j):
            continue
        for name in _named(kernel, stem):
            if name != stem:
                out[name] = stem
        taken.add(stem)
    return out


def _named(kernel: n.Kernel, stem: str) -> list[str]:
    return [x.name for x in walk_only(kernel.body, n.Decl) if _stem(x.name) == stem]


def _stem(name: str) -> str:
    """``row_3`` -> ``row``, ``acc_1_2`` -> ``acc``: the source name of a renamed copy."""
    while "_" in name and name.rsplit("_", 1)[1].isdigit() and name.rsplit("_", 1)[0]:
        name = name.rsplit("_", 1)[0]
    return name


def _scopes(block: tuple[n.Stmt, ...], chain: tuple[int, ...],
            out: dict[str, list[tuple[tuple[int, ...], bool]]]) -> None:
    for s in block:
        if isinstance(s, n.Decl):
            out.setdefault(_stem(s.name), []).append((chain, s.let))
        for field in getattr(s, "BLOCKS", ()):
            inner = getattr(s, field)
            _scopes(inner, chain + (id(inner),), out)


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
