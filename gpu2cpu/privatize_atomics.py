"""privatize_atomics: mark the pointer parameters a CPU launch may accumulate per worker.

Requires: a CPU-form kernel (run last: no later pass may add an access). Guarantees: the body is
unchanged; ``Kernel.private_atomics`` names each pointer parameter that the kernel touches ONLY
through ``atomic.add`` whose old value is unused, or plain adds ``b[i] = b[i] + v`` (``v`` not
reading ``b``) where they are a versioned gradient's private branch on a condition of the launch
(``polypy.analysis.versions``) -- no other load or store of it, no other
atomic operation, no ``T**`` table or record view sharing its bytes with another parameter.

Why: a read-only input that threads of many blocks read (vecnorm's ``in[j]``, layernorm's
``gamma``, matmul's ``A``/``B``) gets an adjoint that the gradient kernel updates with one global
``atomicAdd`` per multiply-add. On a CPU a float atomic add is a compare-and-swap loop on a cache
line that every core fights for. For such a buffer the order of the adds cannot be observed (no
thread reads it, and addition is what the GPU does in an unspecified order anyway), so a launcher
may give each worker thread a private zeroed copy, add into it with plain loads and stores, and
add the copies into the real buffer once the launch is over::

    worker w:  for blocks of its chunks:           after the launch:
                   copy[w][i] += v   (no atomic)       for w in 0..W-1:  d_in += copy[w]

Whether that pays depends on the launch (the array's size against the work, the workers): the
launcher (``codegen.llvm.jit``) decides per launch and otherwise keeps the atomics. This pass only
states what is legal; ``report`` receives one line per marked parameter.
"""
from __future__ import annotations

import dataclasses

from polypy.analysis.versions import plain_when
from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType
from polypy.ir.visitor import Visitor, walk

from gpu2cpu.report import LoweringDecision


class _Uses(Visitor):
    """Per buffer name: does any access other than an ``atomic.add`` with unused result touch it?
    And the first atomic add's location, for the report."""

    def __init__(self) -> None:
        self.other: set[str] = set()
        self.plain: set[str] = set()  # buffers with plain adds ``b[i] = b[i] + v``
        self.first_add: dict[str, n.AtomicRMW] = {}

    def visit_Load(self, e: n.Load) -> None:
        self.other.add(e.buffer)
        self.generic_visit(e)

    def visit_Store(self, s: n.Store) -> None:
        added = _added(s)
        if added is None:
            self.other.add(s.buffer)
            self.generic_visit(s)
            return
        # ``b[i] = b[i] + v``: an add too (a versioned gradient's private branch)
        self.plain.add(s.buffer)
        for e in s.index:
            self.visit(e)
        self.visit(added)

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> None:
        if s.op == "add" and s.dest is None:
            self.first_add.setdefault(s.buffer, s)
        else:
            self.other.add(s.buffer)
        self.generic_visit(s)


def _added(s: n.Store) -> n.Expr | None:
    """``v`` where ``s`` is ``b[i] = b[i] + v`` (or ``v + b[i]``) with ``v`` not reading ``b``."""
    value = s.value
    if not (isinstance(value, n.Binary) and value.op == "add"):
        return None
    for own, other in ((value.a, value.b), (value.b, value.a)):
        if isinstance(own, n.Load) and own.buffer == s.buffer and own.index == s.index \
                and not any(isinstance(x, n.Load) and x.buffer == s.buffer for x in walk(other)):
            return other
    return None


def _shares_bytes(kernel: n.Kernel) -> set[str]:
    """Pointer parameters that are one of several views of one C parameter (records of mixed
    member types, ``T**`` tables and pools): another parameter may read their bytes."""
    out: set[str] = set()
    for sp in kernel.source_params:
        names = [name for _, name in sp.members]
        pointers = [name for name in names
                    if (p := kernel.param(name)) is not None and isinstance(p.ptype, PointerType)]
        if len(names) > 1 and pointers:
            out.update(pointers)
    return out


def privatizable_atomics(kernel: n.Kernel) -> tuple[str, ...]:
    """The pointer parameters of ``kernel`` accessed only by ``atomic.add`` with unused result,
    in parameter order (see module docstring)."""
    uses = _Uses()
    uses.visit_block(kernel.body)
    shared = _shares_bytes(kernel)
    names = tuple(p.name for p in kernel.params
                  if isinstance(p.ptype, PointerType) and p.name in uses.first_add
                  and p.name not in uses.other and p.name not in shared)
    # Plain adds only as a versioned gradient's private branch, on a condition of the launch
    # (elsewhere -- a block window's flush -- the copies would cost what the plain adds save).
    versioned = {name for name, _ in plain_when(kernel, names)}
    return tuple(name for name in names if name not in uses.plain or name in versioned)


def privatize_atomics(kernel: n.Kernel, *, report: list | None = None) -> n.Kernel:
    """``kernel`` with ``private_atomics`` set to ``privatizable_atomics(kernel)``."""
    if kernel.stage != "cpu":
        raise InternalError("privatize_atomics expects a CPU-form kernel", kernel.loc)
    names = privatizable_atomics(kernel)
    if report is not None and names:
        uses = _Uses()
        uses.visit_block(kernel.body)
        for name in names:
            report.append(LoweringDecision(
                kernel.name, uses.first_add[name].loc,
                f"'{name}' is only updated by atomicAdd with the result unused: a launch may give each "
                "CPU worker a private zeroed copy (plain adds) and add the copies in at its end"))
    if names == kernel.private_atomics:
        return kernel
    return dataclasses.replace(kernel, private_atomics=names)
