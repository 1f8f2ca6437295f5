"""A failed device ``assert``, a misaligned access or a surface trap stops the whole launch.

On a GPU such a fault is not a thread leaving early: the kernel is aborted and the launch fails
with a sticky error (``cudaErrorAssert``, ``cudaErrorMisalignedAddress``); no thread continues and
nothing the kernel wrote can be read back. The frontend lowers a fault as
``if (c) { fault; return }`` (``printing.py``): the thread stops. That ``return`` is exact as long
as no ``__syncthreads()`` can follow it, but before a barrier it would put the barrier under
thread-dependent control, which polypy refuses.

``stop_faulted_threads`` turns each such ``return`` that a barrier can follow (later in an
enclosing block, or in an enclosing loop's next iteration) into ``flag = true`` and lets the
thread go on along the kernel's control flow without effects: every statement that may run
after a fault and touches memory (a store, an atomic, a load at a thread-dependent address, a
``printf``, another check) runs under ``if (!flag)``::

    for (...) {                               for (...) {
      if (c) { fault; return }                  if (!flag) { if (c) { fault; flag = true } }
      ...                             ==>       u = ...;                 (block-uniform: kept)
      dst[tid] = v;                             if (!flag) { dst[tid] = v; }
      __syncthreads();                          __syncthreads();
    }                                         }

Only statements that assign names already thread-dependent are guarded, so nothing that decides
where the barriers are (loop bounds, ``break``s of the block's loops, uniform loads) changes: the
barriers stay where every thread reaches them, and a faulted thread follows the same loops as the
others, doing nothing, up to the end of the kernel. The launch fails anyway, so what it computes
there is of no consequence; what matters is that it writes nothing, reads nothing at an address
computed from the faulting one, and that the launch reports the fault.
"""
from __future__ import annotations

import dataclasses

from polypy.analysis.uniformity import thread_dependent_names
from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.queries import declared_names, written_names
from polypy.ir.types import BOOL
from polypy.ir.visitor import rebuild, walk

_COLLECTIVE = (n.Barrier, n.WarpSync, n.Shuffle, n.Vote)
_EFFECTS = (n.Load, n.Store, n.AtomicRMW, n.Print, n.AssertFail, n.Launch, n.Fence, n.Prefetch)


def stop_faulted_threads(kernel: n.Kernel, flag: str) -> n.Kernel:
    """``kernel`` where a fault a barrier can follow sets ``flag`` instead of returning, and what
    may run after it is guarded (module docstring). The kernel declares ``flag`` (false) at its
    top. Unchanged when no fault is followed by a barrier."""
    body = _convert(kernel.body, flag, False)
    if body is kernel.body:
        return kernel
    staged = dataclasses.replace(kernel, body=body)
    guard = _Guard(flag, thread_dependent_names(staged))
    guarded, _ = guard.block(body, False)
    return dataclasses.replace(kernel, body=guarded)


def _has_barrier(s: n.Stmt | tuple[n.Stmt, ...]) -> bool:
    items = s if isinstance(s, tuple) else (s,)
    return any(isinstance(x, n.Barrier) for t in items for x in walk(t))


def _convert(block: tuple[n.Stmt, ...], flag: str, follows: bool) -> tuple[n.Stmt, ...]:
    """``block`` with the ``return`` of each fault that a barrier can follow replaced by
    ``flag = true``; ``follows``: a barrier can run after ``block`` (later in an enclosing block
    or an enclosing loop)."""
    later = [False] * len(block)
    seen = follows
    for i in range(len(block) - 1, -1, -1):
        later[i] = seen
        seen = seen or _has_barrier(block[i])
    out: list[n.Stmt] = []
    changed = False
    for s, after in zip(block, later):
        new = s
        if _is_trap(s, flag):
            if after:
                new = _replace_return(s, flag)
        elif isinstance(s, n.If) and jumps_out(s, n.Return):
            new = rebuild(s, then=_convert(s.then, flag, after), orelse=_convert(s.orelse, flag, after))
        elif isinstance(s, n.For) and jumps_out(s.body, n.Return):
            new = rebuild(s, body=_convert(s.body, flag, after or _has_barrier(s.body)))
        elif isinstance(s, n.While) and jumps_out(s.body, n.Return):
            new = rebuild(s, body=_convert(s.body, flag, after or _has_barrier(s.body) or _has_barrier(s.update)))
        changed = changed or new is not s
        out.append(new)
    return tuple(out) if changed else block


def _is_trap(s: n.Stmt, flag: str) -> bool:
    """``if (c) { ...; return }`` (either branch) that fails an assert or passes on the failure
    of one in a device function (``if (flag) return``), with no other return or barrier."""
    if not isinstance(s, n.If):
        return False
    branches = [b for b in (s.then, s.orelse) if b and isinstance(b[-1], n.Return)]
    if len(branches) != 1 or any(isinstance(x, (n.Return, n.Barrier)) for x in walk(s) if x is not branches[0][-1]):
        return False
    return any(isinstance(x, n.AssertFail) or (isinstance(x, n.Var) and x.name == flag) for x in walk(s))


def _replace_return(s: n.If, flag: str) -> n.If:
    def fix(block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        if block and isinstance(block[-1], n.Return):
            return block[:-1] + (n.Assign(flag, n.Const(True, BOOL), loc=block[-1].loc),)
        return block
    return rebuild(s, then=fix(s.then), orelse=fix(s.orelse))


class _Guard:
    """Puts what may run after a fault under ``if (!flag)`` (``block``)."""

    def __init__(self, flag: str, divergent: frozenset[str]):
        self.flag = flag
        self.divergent = divergent

    def fires(self, s: n.Stmt) -> bool:
        return any(isinstance(x, n.Assign) and x.name == self.flag for x in walk(s))

    def block(self, block: tuple[n.Stmt, ...], after: bool) -> tuple[tuple[n.Stmt, ...], bool]:
        """``block`` guarded; ``after``: a fault may have happened before it runs. Also returns
        whether a fault may happen in it."""
        out: list[n.Stmt] = []
        pending: list[n.Stmt] = []
        fired = False

        def flush() -> None:
            if pending:
                out.append(n.If(n.Unary("not", n.Var(self.flag, BOOL)), tuple(pending), loc=pending[0].loc))
                pending.clear()

        for s in block:
            fires = self.fires(s)
            if not (after or fired):
                flush()
                out.append(self.inside(s, False) if fires else s)
                fired = fires
                continue
            if self.wrappable(s):
                if self.touches_memory(s):
                    pending.append(s)
                else:
                    flush()
                    out.append(s)
            elif isinstance(s, n.Decl) and s.init is not None and s.name in self.divergent \
                    and self.touches_memory(s):
                # keep the declaration where it is (its scope), guard its initialization
                flush()
                out.append(rebuild(s, init=None))
                pending.append(n.Assign(s.name, s.init, loc=s.loc))
            else:
                flush()
                out.append(self.inside(s, True))
            fired = fired or fires
        flush()
        return tuple(out), fired

    def inside(self, s: n.Stmt, after: bool) -> n.Stmt:
        """``s`` with its blocks guarded (a loop's body: also after a fault in an earlier
        iteration)."""
        if isinstance(s, n.If):
            return rebuild(s, then=self.block(s.then, after)[0], orelse=self.block(s.orelse, after)[0])
        if isinstance(s, n.For):
            return rebuild(s, body=self.block(s.body, after or self.fires(s))[0])
        if isinstance(s, n.While):
            again = after or self.fires(s)
            return rebuild(s, body=self.block(s.body, again)[0], update=self.block(s.update, again)[0])
        return s

    def wrappable(self, s: n.Stmt) -> bool:
        """Whether ``s`` may run under ``if (!flag)`` without changing where the barriers are: no
        collective operation in it, no jump out of it, and it assigns no name declared outside it
        that is the same in every thread."""
        if isinstance(s, n.Decl):
            return s.init is None
        if any(isinstance(x, _COLLECTIVE) for x in walk(s)) or jumps_out(s):
            return False
        return all(name in self.divergent or name == self.flag for name in written_names(s) - declared_names(s))

    @staticmethod
    def touches_memory(s: n.Stmt) -> bool:
        return any(isinstance(x, _EFFECTS) for x in walk(s))


__all__ = ["stop_faulted_threads"]
