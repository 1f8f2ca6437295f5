"""hoist_faults: a block-uniform misaligned-address check goes first (GPU form -> GPU form).

Requires: GPU form after ``eliminate_returns`` (a check is ``if (c) { fault } else { rest }``,
``frontend/lower/views.py``). Guarantees: the same results, and a check whose condition is the
same for every thread of a block (``uniform`` faults, ``frontend.lower.printing.uniform_faults``:
they name thread 0), reads no memory, and is preceded at the kernel's top level only by
statements without an effect seen once the launch has failed (``_may_follow``: locals it does
not read, loads, stores, counted loops) becomes the kernel's only top-level statement::

    var v_x: f32                       if ((blockIdx.x * s + off & 3) != 0) { fault }
    if ((blockIdx.x * s + off & 3)     else { var v_x: f32; rest }
        != 0) { fault }          ==>
    else { rest }

The same is done again inside the branch without the fault (a second view's check). The CPU
schedule then tests it once per block, outside the loops over threads, as it does any
uniform ``if`` around the whole body, and the threads run the path without a check.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.queries import read_names
from polypy.ir.visitor import walk


def _uniform_fault(s: n.Stmt) -> bool:
    if not isinstance(s, n.If) or not s.then:
        return False
    faults = [x for x in s.then if isinstance(x, n.AssertFail)]
    return bool(faults) and all(x.fault == "misaligned" and all(isinstance(w, (n.BlockIdx, n.Const)) for w in x.where)
                                for x in faults) and \
        not any(isinstance(x, (n.ThreadIdx, n.Load)) for x in walk(s.cond))


_KEEP_ORDER = (n.Print, n.Launch, n.AssertFail, n.Barrier, n.WarpSync, n.Fence, n.Shuffle, n.Vote, n.While, n.Return,
               n.Break, n.Continue)


def _may_follow(s: n.Stmt) -> bool:
    """Whether ``s`` may run after a uniform fault check that came after it: it has no effect
    anyone sees once the launch has failed. Loads, locals, stores and counted loops qualify:
    a faulting launch's writes are lost with the CUDA context (every later call fails), and
    polypy checks every launch's footprint; what prints, launches, synchronizes or may not end
    keeps its place."""
    return not any(isinstance(x, _KEEP_ORDER) for x in walk(s))


def _hoist(body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
    for i, s in enumerate(body):
        if _uniform_fault(s):
            before = body[:i]
            written = {x.name for t in before for x in walk(t) if isinstance(x, (n.Decl, n.Assign))} | \
                {x.var for t in before for x in walk(t) if isinstance(x, n.For)}
            if written & read_names(s.cond):
                return body
            moved = dataclasses.replace(s, orelse=_hoist(before + s.orelse + body[i + 1:]))
            return (moved,)
        if not _may_follow(s):
            return body
    return body


def hoist_faults(kernel: n.Kernel) -> n.Kernel:
    body = _hoist(kernel.body)
    return kernel if body == kernel.body else dataclasses.replace(kernel, body=body)
