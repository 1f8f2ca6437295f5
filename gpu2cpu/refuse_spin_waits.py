"""refuse_spin_waits: a located error for loops that can only end through another thread's store.

Requires: GPU form. Guarantees: the kernel is unchanged, or the translation stops with a
``UserError`` at a loop that waits for memory to change (a spin wait)::

    do { seen = flags[i - 1]; } while (seen == 0);      // a maximal-independent-set sweep
    if (threadIdx.x == 0) while (ready[blockIdx.x - 1] == 0) ;   // blocks in a chain

On a GPU the threads of a block (and the blocks of a grid) run at once, so another thread's
store ends the wait. The CPU schedule runs a block's threads one after another and the blocks
on a few cores: a thread that waits for a later one waits forever (and without ``volatile`` in
the emitted code a C compiler may hoist the load, or drop the side-effect-free infinite loop,
which made such a kernel "pass" at -O3 by accident). Until blocks run with real concurrency,
such loops are refused.

What counts as a spin wait, decided on the loop alone (no proof of a hang is needed to refuse,
only that nothing but memory can end it):
* every way out of the loop (its condition, each ``break`` or ``return`` under its ``if``\\ s) is
  decided by values read from memory in the loop, and by nothing the loop itself steps (a
  counter ``k++``, a pointer chase ``j = next[j]``, a sum are progress: such loops end by
  themselves);
* the loop stores nothing to the memory it reads for that (an ``atomicCAS`` retry loop writes
  what it waits on, and ends in one trip when no other thread interferes); atomics that change
  nothing (``atomicAdd(p, 0)``, ``atomicOr(p, 0)``, a CAS storing what it compares with) are
  reads.

In a whole program (``program``), a loop that polls memory only the host or another stream's
work can write is accepted: the kernel can be released while it runs on a created stream, whose
work runs alongside the host (``polypy/runtime/parts/queues.h``)::

    __global__ void hold(volatile unsigned* latch) { while (latch[0] < 1) ; }

Accepted when every buffer its exits wait on is a pointer parameter read through ``volatile``
(or only by atomics that change nothing), and the kernel writes no global memory at all (no
store or atomic to a pointer parameter or a ``__device__`` array, no launch): then no thread of
the grid can end the wait, whichever arguments alias. The kernel's ``host_polls`` names those
parameters: the C code reads them as volatile every trip, and the launcher refuses, at run time,
to run on the calling thread (the default stream), where nothing could store while it waits.
"""
from __future__ import annotations

import dataclasses

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType
from polypy.ir.visitor import walk, walk_only

# Atomics that store the value they find when their operand is 0: reads in disguise.
_ZERO_IS_IDENTITY = ("add", "sub", "or", "xor")


def refuse_spin_waits(kernel: n.Kernel, *, program: bool = False) -> n.Kernel:
    pointers = frozenset(p.name for p in kernel.params if isinstance(p.ptype, PointerType))
    polls: set[str] = set()
    for loop in walk_only(kernel, n.While):
        waited = _spin_waits(loop, pointers)
        if waited is None:
            continue
        if program and _host_released(kernel, loop, waited, pointers):
            polls |= waited
            continue
        raise UserError("this loop can only end through a store by another thread or block (a spin wait): "
                        "polypy runs a block's threads one after another and the blocks on a few cores, so "
                        "the wait may never end; spin waits are not supported", loop.loc)
    if polls:
        return dataclasses.replace(kernel, host_polls=tuple(sorted(polls)))
    return kernel


def _host_released(kernel: n.Kernel, loop: n.While, waited: set[str], pointers: frozenset[str]) -> bool:
    """Whether only the host (or another stream's work) can end ``loop``'s wait on ``waited``,
    and every poll of it is a memory read (see the module's docstring)."""
    if not waited or not waited <= pointers:
        return False
    for w in waited:
        plain = any(x.buffer == w for x in _walk_loop_only(loop, n.Load))
        if plain and w not in kernel.volatile_params:
            return False
    private = {b.name for b in kernel.buffers if b.space in ("shared", "local")}
    for x in walk_only(kernel, n.Store, n.AtomicRMW, n.Launch):
        if isinstance(x, n.Launch):
            return False
        if x.buffer not in private and not (isinstance(x, n.AtomicRMW) and _reads_only(x)):
            return False
    return True


def _walk_loop_only(loop: n.While, kind):
    yield from walk_only(loop.cond, kind)
    for block in (loop.body, loop.update):
        yield from walk_only(block, kind)


def _spin_waits(loop: n.While, pointers: frozenset[str]) -> set[str] | None:
    """The buffers ``loop`` waits on when it is a spin wait, else None."""
    values: dict[str, list[n.Expr | None]] = {}  # local -> what the loop assigns it (None: not a load)
    written: set[str] = set()
    for x in _walk_loop(loop):
        if isinstance(x, n.Assign):
            values.setdefault(x.name, []).append(x.value)
        elif isinstance(x, n.Decl) and x.init is not None:
            values.setdefault(x.name, []).append(x.init)
        elif isinstance(x, n.Store):
            written.add(x.buffer)
        elif isinstance(x, n.AtomicRMW):
            if x.dest is not None:
                values.setdefault(x.dest, []).append(n.Load(x.buffer, x.index, x.value.type) if _reads_only(x) else None)
            if not _reads_only(x):
                written.add(x.buffer)
        elif isinstance(x, (n.Shuffle, n.Vote)):
            values.setdefault(x.dest, []).append(None)  # other lanes' values: not ours to judge
    fed = _memory_fed(values)
    exits = _exits(loop)
    if not exits:
        return None
    waited: set[str] = set()
    for conds in exits:
        names = {v.name for c in conds for v in walk_only(c, n.Var)}
        loads = {x.buffer for c in conds for x in walk_only(c, n.Load)}
        variant = names & values.keys()
        if variant - fed or not (variant or loads):
            return None  # something the loop steps, or nothing the loop reads, decides this exit
        waited |= loads
        for name in variant:
            waited |= {x.buffer for v in values[name] for x in walk_only(v, n.Load)}  # type: ignore[arg-type]
    if any(w == b or (w in pointers and b in pointers) for w in written for b in waited):
        return None
    return waited


def _reads_only(a: n.AtomicRMW) -> bool:
    if a.op in _ZERO_IS_IDENTITY:
        return isinstance(a.value, n.Const) and a.value.value == 0
    return a.op == "cas" and a.compare is not None and a.compare == a.value


def _memory_fed(values: dict[str, list[n.Expr | None]]) -> set[str]:
    """Locals whose every value in the loop is read from memory, at places that depend on nothing
    the loop steps (other such locals aside): the greatest such set."""
    fed = {name for name, vs in values.items()
           if all(v is not None and any(isinstance(x, n.Load) for x in walk(v)) for v in vs)}
    changed = True
    while changed:
        changed = False
        for name in sorted(fed):
            uses = {x.name for v in values[name] for x in walk_only(v, n.Var)}  # type: ignore[arg-type]
            if name in uses or (uses & values.keys()) - fed:
                fed.discard(name)
                changed = True
    return fed


def _walk_loop(loop: n.While):
    for block in (loop.body, loop.update):
        for s in block:
            yield from walk(s)


def _exits(loop: n.While) -> list[tuple[n.Expr, ...]]:
    """The ways out of ``loop``, each as the conditions that decide it: the loop's own condition,
    each ``break`` of this loop and each ``return`` with the ``if`` conditions around it."""
    out: list[tuple[n.Expr, ...]] = []
    if not (isinstance(loop.cond, n.Const) and loop.cond.value):
        out.append((loop.cond,))
    stack: list[tuple[n.Stmt, tuple[n.Expr, ...], bool]] = [(s, (), False) for s in loop.body + loop.update]
    while stack:
        s, conds, nested = stack.pop()
        if isinstance(s, n.Break) and not nested or isinstance(s, n.Return):
            out.append(conds)
        elif isinstance(s, n.If):
            stack.extend((t, conds + (s.cond,), nested) for t in s.then + s.orelse)
        elif isinstance(s, (n.For, n.While)):
            stack.extend((t, conds, True) for t in s.body + getattr(s, "update", ()))
    return out
