"""Adjoints of read-only inputs without atomics, for gradients that polypy runs on the CPU (issue 38).

A stencil ``B[p] = sum_k c_k * A[r_k(p)]`` scatters ``d_A[r_k(p)] += c_k * d_B[p]`` from every
thread for every tap ``k``; two threads add to one element of ``d_A`` (p and p' with
``r_k(p) = r_j(p')``), so ``K_grad`` adds them atomically or through block windows. On a CPU the
gradient may run as several launches in sequence under the one ``K_grad`` call (every block of
one launch finishes before the next starts), which keeps the calling convention (same
arguments, same launch, same final contents of every buffer and shadow) and removes the
conflict:

* one **tap launch** per load ``A[r_k(p)]`` of the input (loads of one index: one tap), run first: the reverse sweep sliced
  down to that load's update ``d_A[r_k(p)] += partial_k(p) * d_B[p]`` (everything else the
  update does not need is dead and removed; no other store is kept). isl proves ``r_k``
  injective on the domain where the update runs (``privacy(tap, d_A)``: every element of
  ``d_A`` touched by at most one thread of the tap launch), so the update is a plain ``+=``;
  the taps run one after the other, so no two of them race either. The domain is the guard of
  the forward's store itself: boundaries need no separate code.
* the **rest** of ``K_grad`` after them: the forward effect, the consumed seeds, the adjoints of
  every other input, with the updates of the gathered input removed.

Each tap launch is one pass over the grid: for T taps, T passes of plain, vectorizable adds in
place of T atomics (or window adds and flushes) per thread.

The split is exact only where a tap launch computes what ``K_grad`` adds at that load, which
is checked on the tap (everything else keeps today's form, and the reason is reported):

* the input is read-only in ``K`` and its shadow is touched by nothing but these updates;
* a tap reads only buffers that ``K_grad`` does not write (read-only inputs, coefficient
  arrays), arrays local to a thread, and the *seeds* ``d_B`` of outputs whose seed is what
  ``K_grad`` reads there (``seed_exact``: ``B`` is written by one store outside loops, never
  read by ``K``, not updated atomically, and each element written by one thread, so ``K_grad``
  reads ``d_B[p]`` before the one consumption that zeroes it and nothing else writes it);
* a tap has no statement with an effect beyond its update (output, traps, warp operations,
  shared memory).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from polypy.ir import nodes as n
from polypy.ir.queries import buffers_written, conjuncts, declared_names
from polypy.ir.rewrite import inline_lets, rename_locals
from polypy.ir.visitor import Mutator, walk

from autodiff.sweep import update_of

# isl's answer for (kernel, buffer): every element accessed by one thread of the grid always
# ((True, None)), where a grid-uniform condition holds ((False, condition)), or not proved
# ((False, None))
Private = Callable[[n.Kernel, str], "tuple[bool, n.Expr | None]"]
Simplify = Callable[[n.Kernel], n.Kernel]

_ALLOWED = (n.Decl, n.Assign, n.Store, n.If, n.For)


@dataclasses.dataclass(frozen=True)
class GatherSplit:
    """``taps`` (run first, in order, each with ``K``'s launch and ``K_grad``'s arguments), then
    ``rest``; ``gathered`` maps each input so treated to its updates' loads (for the report),
    ``kept`` each input that keeps ``K_grad``'s form to the reason."""
    taps: tuple[n.Kernel, ...]
    rest: n.Kernel
    gathered: dict[str, tuple[n.Store, ...]]
    kept: dict[str, str]
    swept: dict[str, str] = dataclasses.field(default_factory=dict)  # input -> the sweep's description
    unswept: dict[str, str] = dataclasses.field(default_factory=dict)  # input -> why its taps are not one sweep


def seed_exact(kernel: n.Kernel, buffer: str, private: tuple[bool, n.Expr | None]
               ) -> tuple[bool, str, n.Expr | None]:
    """Whether ``K_grad`` reads the seed of ``buffer`` (its shadow's contents on entry) wherever it
    reads its shadow (and under which run-time condition, if any): ``buffer`` is written outside
    loops, by stores no two of which one thread runs (branches of one ``if``), not updated
    atomically, read only outside loops and before any store the thread may run after the read
    (``B[p] = B[p] - ...``: the reverse sweep consumes the seed at the store before it adds the
    loads' adjoints), and (``private``, from isl) each element is accessed by one thread."""
    events = list(_events(kernel.body, buffer, False, ()))
    if any(kind == "atomic" for kind, _, _ in events):
        return False, f"{buffer} is updated atomically", None
    stores = [i for i, (kind, _, _) in enumerate(events) if kind == "store"]
    if not stores:
        return False, f"{buffer} is not written", None
    if any(events[i][1] for i in stores):
        return False, f"{buffer} is written in a loop", None
    if any(not _exclusive(events[i][2], events[j][2]) for i in stores for j in stores if i < j):
        return False, f"{buffer} may be written twice by one thread", None
    for i, (kind, looped, path) in enumerate(events):
        if kind == "load" and (looped or any(j < i and not _exclusive(path, events[j][2]) for j in stores)):
            return False, f"{buffer} is read by the kernel after its store or in a loop (its adjoint is more than " \
                          f"its seed there)", None
    if not private[0] and private[1] is None:
        return False, f"isl does not prove that each element of {buffer} is accessed by one thread", None
    return True, "", None if private[0] else private[1]


def _exclusive(a: tuple, b: tuple) -> bool:
    """Whether two branch paths ((if, side), ...) lie in different branches of one ``if``."""
    for x, y in zip(a, b):
        if x != y:
            return x[0] == y[0]
    return False


def _events(block: tuple[n.Stmt, ...], buffer: str, looped: bool, path: tuple):
    """("load" | "store" | "atomic", in a loop, branch path) for each access of ``buffer``, in
    program order (a statement's loads before its store)."""
    def loads(*exprs):
        for e in exprs:
            if e is not None:
                for x in walk(e):
                    if isinstance(x, n.Load) and x.buffer == buffer:
                        yield "load", looped, path

    for st in block:
        if isinstance(st, n.If):
            yield from loads(st.cond)
            yield from _events(st.then, buffer, looped, path + ((id(st), 0),))
            yield from _events(st.orelse, buffer, looped, path + ((id(st), 1),))
        elif isinstance(st, n.For):
            yield from loads(st.start, st.stop, st.step)
            yield from _events(st.body, buffer, True, path)
        elif isinstance(st, n.While):
            yield from loads(st.cond)
            yield from _events(st.body + st.update, buffer, True, path)
        else:
            for f in st.CHILDREN:
                v = getattr(st, f)
                yield from loads(*(v if isinstance(v, tuple) else (v,)))
            if isinstance(st, n.Store) and st.buffer == buffer:
                yield "store", looped, path
            elif isinstance(st, n.AtomicRMW) and st.buffer == buffer:
                yield "atomic", looped, path


class _Slice(Mutator):
    """``K_grad`` with every store and atomic to a non-local buffer removed except ``keep``
    (identity), and every barrier (a tap reads no memory another thread writes)."""

    def __init__(self, keep: set[int], local: set[str], guards: dict[int, n.Expr] | None = None):
        self.keep, self.local, self.guards = keep, local, guards or {}

    def visit_Store(self, s: n.Store):
        if id(s) in self.guards:
            return n.If(self.guards[id(s)], (s,), loc=s.loc)
        return s if id(s) in self.keep or s.buffer in self.local else None

    def visit_AtomicRMW(self, s: n.AtomicRMW):
        return s if s.buffer in self.local and s.dest is None else None

    def visit_Barrier(self, s: n.Barrier):
        return None


def _tap_problem(tap: n.Kernel, shadow: str, written: set[str], seeds: dict[str, tuple[bool, str, n.Expr | None]],
                 shadow_of: dict[str, str]) -> tuple[str | None, list[n.Expr]]:
    """Why the tap does not compute what ``K_grad`` adds (None if it does), and the run-time
    conditions of the seeds it reads."""
    primal_of = {v: k for k, v in shadow_of.items()}
    local = {b.name for b in tap.buffers if b.space == "local"}
    conditions: list[n.Expr] = []
    for x in walk(tap):
        if isinstance(x, n.Stmt) and not isinstance(x, _ALLOWED):
            return f"the reverse sweep it needs has a {type(x).__name__} statement", []
        if isinstance(x, n.AtomicRMW) and x.buffer not in local:
            return "the reverse sweep it needs has an atomic", []
        if isinstance(x, n.Load) and x.buffer not in local and x.buffer != shadow:
            if x.buffer in primal_of:
                ok, why, cond = seeds.get(primal_of[x.buffer], (False, "it is not an output of the kernel", None))
                if not ok:
                    return f"its contribution reads {x.buffer}, and {why}", []
                if cond is not None and cond not in conditions:
                    conditions.append(cond)
            elif x.buffer in written:
                return f"its contribution reads {x.buffer}, which the kernel or its gradient writes", []
    return None, conditions


def _all(conditions: list[n.Expr]) -> n.Expr | None:
    out: n.Expr | None = None
    for c in conditions:
        out = c if out is None else n.Binary("land", out, c)
    return out


class _Rest(Mutator):
    """``K_grad`` without the gathered updates, except those of the last round of taps (``own``:
    plain ``+=`` in the rest itself, as in their tap); an update whose tap runs only under a
    condition stays, as an atomic, where the condition does not hold (``hold``: the copy of the
    body for launches where every condition holds)."""

    def __init__(self, conditions: dict[int, n.Expr | None], own: set[int], hold: bool = False):
        self.conditions, self.own, self.hold = conditions, own, hold

    def visit_Store(self, s: n.Store):
        if id(s) not in self.conditions:
            return s
        cond = self.conditions[id(s)]
        plain = s if id(s) in self.own else None
        if cond is None or self.hold:
            return plain
        value = update_of(s, s.buffer)
        assert value is not None
        atomic = n.AtomicRMW("add", s.buffer, s.index, value, loc=s.loc)
        if plain is not None:
            return n.If(cond, (plain,), (atomic,), loc=s.loc)
        return n.If(n.Unary("not", cond), (atomic,), loc=s.loc)


def split_gather(grad: n.Kernel, candidates: tuple[str, ...], shadow_of: dict[str, str],
                 seeds: dict[str, tuple[bool, str, n.Expr | None]], private: Private,
                 simplify: Simplify, sweep_taps: bool = True) -> GatherSplit:
    """The tap launches of ``candidates`` (read-only inputs of ``K``, whose updates in ``grad``
    are plain ``+=``: built with them taken as private) and ``grad`` without those updates.
    ``seeds[B]``: ``seed_exact`` of each output; ``private(kernel, buffer)``: isl's proof that
    every element of ``buffer`` is accessed by one thread of ``kernel``'s grid (``Private``);
    ``simplify`` removes dead code (the driver's after-AD passes). A tap that is exact only
    under a grid-uniform run-time condition (isl's, on the launch and the integer arguments)
    runs under it, and the rest keeps that update, atomic, where it does not hold. Bindings are
    written out first: taps and sweeps compare and shift the indices as expressions of the
    global thread index."""
    grad = inline_lets(grad)
    written = buffers_written(grad)
    local = {b.name for b in grad.buffers if b.space == "local"}
    taps: list[n.Kernel] = []
    gathered: dict[str, tuple[n.Store, ...]] = {}
    kept: dict[str, str] = {}
    swept: dict[str, str] = {}
    notes: dict[str, str] = {}
    sweeps: list[n.Kernel] = []
    conditions: dict[int, n.Expr | None] = {}
    rounds: list[list[tuple[list[n.Store], n.Expr | None]]] = []
    for a in candidates:
        shadow = shadow_of[a]
        updates = [x for x in walk(grad) if isinstance(x, n.Store) and x.buffer == shadow]
        others = [x for x in walk(grad) if isinstance(x, (n.Load, n.AtomicRMW)) and x.buffer == shadow]
        if (not updates or any(update_of(s, shadow) is None for s in updates) or len(others) != len(updates)
                or len({id(s) for s in updates}) != len(updates)):
            kept[a] = f"{shadow} is written by more than the accumulations of the loads of {a}"
            continue
        mine: list[tuple[list[n.Store], n.Kernel, n.Expr | None]] = []
        plain: list[n.Kernel] = []
        problem = None
        groups: dict[tuple[n.Expr, ...], list[n.Store]] = {}
        for s in updates:  # the loads of one element by one thread: one tap
            groups.setdefault(s.index, []).append(s)
        for group in groups.values():
            keep = {id(s) for s in group}
            sliced = _Slice(keep, local).visit(grad)
            # nothing after the last top-level statement holding an update can reach it (the
            # block reductions at the end of K_grad: loops left without effects)
            last = max(i for i, st in enumerate(sliced.body)
                       if any(isinstance(x, n.Store) and id(x) in keep for x in walk(st)))
            tap = simplify(dataclasses.replace(sliced, body=sliced.body[:last + 1], name=f"{grad.name}_{a}_tap"))
            problem, conds = _tap_problem(tap, shadow, written, seeds, shadow_of)
            if problem is None:
                always, when = private(tap, shadow)
                if not always and when is None:
                    problem = ("isl does not prove that the read relation of a load is injective on its domain "
                               "(two threads of one tap may add to one element)")
                elif when is not None:
                    conds.append(when)
            if problem is not None:
                break
            cond = _all(conds)
            plain.append(tap)
            if cond is not None:
                tap = dataclasses.replace(tap, body=(n.If(cond, tap.body, loc=tap.loc),))
            mine.append((group, dataclasses.replace(tap, name=f"{grad.name}_{a}_tap{len(taps) + len(mine)}"), cond))
        if problem is not None:
            kept[a] = problem
            continue
        gathered[a] = tuple(updates)
        if sweep_taps and len(plain) > 1:
            mine, why = _sweeps(plain, mine, shadow, f"{grad.name}_{a}", private, simplify, sweeps, conditions, swept, a)
            if why:
                notes[a] = why
            if not mine:
                continue
        rounds.append([(group, c) for group, _, c in mine])
        conditions.update({id(s): c for group, _, c in mine for s in group})
    # The launches: round j runs the j-th tap of every input (different shadows, each private);
    # the last round's updates stay in the rest (plain, as in their taps: one launch fewer).
    count = max((len(r) for r in rounds), default=0)
    own: set[int] = set()
    for j in range(count):
        members = [r[j] for r in rounds if j < len(r)]
        if j == count - 1:
            own = {id(s) for group, _ in members for s in group}
            break
        keep = {id(s) for group, _ in members for s in group}
        conds = {c for _, c in members}
        guards = {id(s): c for group, c in members for s in group if c is not None} if len(conds) > 1 else {}
        sliced = _Slice(keep, local, guards).visit(grad)
        last = max(i for i, st in enumerate(sliced.body)
                   if any(isinstance(x, n.Store) and id(x) in keep for x in walk(st)))
        tap = simplify(dataclasses.replace(sliced, body=sliced.body[:last + 1], name=f"{grad.name}_tap{j}"))
        (cond,) = conds if len(conds) == 1 else (None,)
        if cond is not None:
            tap = dataclasses.replace(tap, body=(n.If(cond, tap.body, loc=tap.loc),))
        taps.append(tap)
    taps.extend(sweeps)
    rest = simplify(_Rest(conditions, own).visit(grad)) if gathered else grad
    distinct = [c for c in dict.fromkeys(conditions.values()) if c is not None]
    if distinct and not any(isinstance(x, n.Barrier) for x in walk(grad)):
        # the conditions are grid-uniform: test them once, around two copies of the body (the
        # per-update tests in the thread loop keep it from vectorizing)
        plain = simplify(_Rest(conditions, own, hold=True).visit(grad))
        taken = declared_names(rest) | declared_names(plain) | {p.name for p in grad.params}
        mapping: dict[str, str] = {}
        for name in sorted(declared_names(plain)):  # a kernel declares each local once
            new, i = f"{name}_g", 1
            while new in taken:
                new, i = f"{name}_g{i}", i + 1
            taken.add(new)
            mapping[name] = new
        body = rename_locals(plain.body, mapping)
        rest = dataclasses.replace(rest, body=(n.If(_all(distinct), body, rest.body, loc=grad.loc),))
    return GatherSplit(tuple(taps), rest, gathered, kept, swept, notes)


def _sweeps(plain: list[n.Kernel], mine: list, shadow: str, name: str, private: Private, simplify: Simplify,
            sweeps: list[n.Kernel], conditions: dict[int, n.Expr | None], swept: dict[str, str], a: str
            ) -> tuple[list, str]:
    """One sweep per class of ``a``'s taps that are translations of one another (``sweeps``,
    ``conditions`` and ``swept`` updated); the taps left for tap launches, and why they are."""
    from autodiff.sweep import translation_classes

    classes, why = translation_classes(plain, shadow)
    if classes is None:
        return mine, why
    done: set[int] = set()
    words = []
    for k, members in enumerate(classes):
        if len(members) < 2:
            continue
        got, no = _sweep([plain[i] for i in members], [mine[i][2] for i in members], shadow,
                         name if len(classes) == 1 else f"{name}_c{k}", private, simplify)
        if got is None:
            why = no
            continue
        sweeps.extend(got[0])
        done.update(members)
        words.append(got[2])
        conditions.update({id(s): got[1] for i in members for s in mine[i][0]})
    left = [m for i, m in enumerate(mine) if i not in done]
    if len(classes) > 1 and not why:
        why = (f"the read relations of its loads are translations of one another in {len(classes)} classes, "
               f"not one")
    if words:
        head = (f"{len(classes)} classes of loads whose read relations are translations of one another, one sweep "
                f"per class of two or more: " if len(classes) > 1 else "")
        swept[a] = head + "; ".join(words) + (f"; its other {len(left)} loads in tap launches" if left else "")
    return left, why


def _sweep(taps: list[n.Kernel], conds: list[n.Expr | None], shadow: str, name: str, private: Private,
           simplify: Simplify) -> tuple[tuple[list[n.Kernel], n.Expr | None, str] | None, str]:
    """(the sweep and halo launches of one input, each under the one condition where all are
    exact, the report's words), or None and why not (``autodiff.sweep``)."""
    from autodiff.sweep import build_sweep

    got, why = build_sweep(taps, shadow, name)
    if got is None:
        return None, why
    if got.passes() >= len(taps):  # the cost choice: passes over the grid, at a launch that covers the data
        return None, (f"the single sweep would cost {got.passes()} passes over the grid ({got.unskipped} of its halo "
                      f"launches not skipped by any test isl finds), the tap launches {len(taps)}")
    sweep = simplify(got.sweep)
    known = _all(list(dict.fromkeys(x for c in conds if c is not None for x in conjuncts(c))))
    # asked under the taps' own conditions (isl then looks for what the sweep needs beyond them)
    # about the probe (two accesses) where there is one, else the sweep itself
    asked = got.probe if got.probe is not None else sweep
    always, when = private(asked if known is None else dataclasses.replace(
        asked, body=(n.If(known, asked.body, loc=asked.loc),)), shadow)
    if not always and when is None:
        return None, "isl does not prove that the single sweep adds to each element of the shadow from one thread"
    every = [x for c in conds + [when] if c is not None for x in conjuncts(c)]
    cond = _all(list(dict.fromkeys(every)))
    launches = [sweep] + [simplify(h) for h in got.halos]
    if cond is not None:
        launches = [dataclasses.replace(k, body=(n.If(cond, k.body, loc=k.loc),)) for k in launches]
    return (launches, cond, got.describe()), ""

