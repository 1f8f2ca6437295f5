"""lower_block_atomics: atomics on block-private memory become plain read-modify-write.

Requires: a CPU-form kernel. Guarantees: same results; afterwards ``AtomicRMW`` only targets
global (pointer parameter) and ``device`` memory, as ``docs/ir.md`` demands of the CPU form.

In the CPU form one CPU thread runs a whole block and its thread loops run the threads one
after the other, so nothing else can touch shared or per-thread memory in between: an atomic
there is an ordinary load, operation and store (CUDA's definitions of each operation)::

    old = atomic.add local[b], 1u      ==>    var local_old: u32 = local[b]
                                              local[b] = local_old + 1u
                                              old = local_old

The old value goes to a fresh local first, since the operands may read the destination.
"""
from __future__ import annotations

from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.atomics import atomic_result
from polypy.ir.visitor import Mutator

from gpu2cpu.names import NameSupply

_PRIVATE = ("shared", "local")


class _Lower(Mutator):
    def __init__(self, kernel: n.Kernel, names: NameSupply):
        self.kernel = kernel
        self.names = names

    def visit_AtomicRMW(self, s: n.AtomicRMW):
        if self.kernel.space(s.buffer) not in _PRIVATE:
            return s
        ty = self.kernel.elem_type(s.buffer)
        # The old value goes to a fresh local first: the operands may read the destination.
        old_name = self.names.fresh(f"{s.buffer}_old")
        old = n.Var(old_name, ty)
        out: list[n.Stmt] = [
            n.Decl(old_name, ty, n.Load(s.buffer, s.index, ty, loc=s.loc), loc=s.loc),
            n.Store(s.buffer, s.index, atomic_result(s.op, old, s.value, s.compare, ty), loc=s.loc),
        ]
        if s.dest is not None:
            out.append(n.Assign(s.dest, old, loc=s.loc))
        return tuple(out)


def lower_block_atomics(kernel: n.Kernel) -> n.Kernel:
    """Replace atomics on shared and per-thread memory by plain updates (see module docstring)."""
    if kernel.stage != "cpu":
        raise InternalError("lower_block_atomics expects a CPU-form kernel", kernel.loc)
    return _Lower(kernel, NameSupply(kernel)).visit(kernel)

