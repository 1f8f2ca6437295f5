"""split_scatter_adds: a block's scatter-adds into a shared array go to ``COPIES`` copies of it,
added into it afterwards (CPU form -> CPU form).

Requires: a CPU-form kernel. Guarantees: the same results (the adds are of unsigned integers,
exact in any order); afterwards no innermost thread loop inside a serial loop adds at loaded
indices into a shared array of unsigned integers that its statement only adds to.

A histogram's loop over the threads adds at indices it loads (``atomic.add local[data[i]], 1u``).
One CPU thread runs those adds one after the other, and where consecutive elements fall into the
same bin each add waits for the store of the one before (a skewed histogram: most of them). As a
hand-written OpenMP histogram does, consecutive threads add into ``COPIES`` copies of the array,
each thread of a group to its own, so that that many adds are in flight; the loop over the
threads is unrolled by ``COPIES`` so that each copy is a constant offset::

    for i_base ... {                           local_sub[c][b] = 0u            (every c, b)
      for threads tx = 0u to hi {              for i_base ... {
        atomic.add local[data[i]], 1u   ==>      var tx_q: u32 = hi - hi % 4u
      }                                          for tx_u = 0u to tx_q step 4u {
    }                                              atomic.add local_sub[0u][data[i(tx_u)]], 1u
                                                   ...
                                                   atomic.add local_sub[3u][data[i(tx_u + 3u)]], 1u
                                                 }
                                                 for threads tx = tx_q to hi { atomic.add local[data[i]], 1u }
                                               }
                                               local[b] = local[b] + local_sub[0u][b] + ... (every b)

The threads run in their own order still. Applied to one top-level statement of the block (CPU
form: what lies between two barriers of the CUDA kernel) for each shared array of unsigned
integers (of at most ``MAX_ELEMENTS`` elements) that the statement only adds to, with the old
value unused (no load, store or other atomic of it), where an innermost thread loop adds into
it at an index that loads (a scatter), directly in its body or under ifs, and that loop lies
inside a serial loop of the statement: a block then makes many such adds (a grid-stride loop),
and the copies' zeroing and adding (``2 * COPIES * elements`` operations per block) pay.
``report`` receives one ``LoweringDecision`` per array split.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.queries import declared_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import I64, U32
from polypy.ir.visitor import Mutator, Visitor, walk

from gpu2cpu.names import NameSupply
from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_affine import counter_dim, i64
from gpu2cpu.thread_loops import stem_of

# Copies of the array: adds in flight. The OpenMP port of the bench's histogram uses four.
COPIES = 4
# Arrays of at most this many elements (the copies of each block are zeroed and added up once).
MAX_ELEMENTS = 4096


def split_scatter_adds(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Scatter-adds into shared arrays split over copies; see the module docstring."""
    if kernel.stage != "cpu":
        return kernel
    names = NameSupply(kernel)
    buffers = list(kernel.buffers)
    copies: list[tuple[str, str]] = []
    body: list[n.Stmt] = []
    for s in kernel.body:
        before: list[n.Stmt] = []
        after: list[n.Stmt] = []
        for array in _candidates(kernel, s):
            sub = n.Buffer(names.fresh(f"{array.name}_sub"), array.elem,
                           (n.Const(COPIES, U32),) + tuple(array.shape), "shared")  # type: ignore[operator]
            split = _Split(array.name, sub.name, names, _scatter_loops(s, array.name)).visit(s)
            if split is s:
                continue
            buffers.append(sub)
            copies.append((sub.name, array.name))
            size = int(array.shape[0].value)  # type: ignore[index, union-attr]
            before.append(_zero(sub, size, names, s.loc))
            after.append(_merge(array, sub.name, size, names, s.loc))
            s = split
            if report is not None:
                report.append(LoweringDecision(kernel.name, s.loc,
                                               f"scatter-adds into {array.name} spread over {COPIES} copies "
                                               f"({sub.name}), added into it after the statement"))
        body.extend(before + [s] + after)
    if len(buffers) == len(kernel.buffers):
        return kernel
    return dataclasses.replace(kernel, buffers=tuple(buffers), body=tuple(body), copies=kernel.copies + tuple(copies))


def _candidates(kernel: n.Kernel, s: n.Stmt) -> list[n.Buffer]:
    """The shared arrays ``s`` only adds to, with a scatter in a thread loop under a serial loop."""
    out = []
    for b in kernel.buffers:
        if b.space != "shared" or b.shape is None or len(b.shape) != 1 or not isinstance(b.shape[0], n.Const):
            continue
        if not (b.elem.is_int and not b.elem.is_signed) or not 0 < int(b.shape[0].value) <= MAX_ELEMENTS:
            continue
        only_adds = True
        for x in walk(s):
            if isinstance(x, n.Load) and x.buffer == b.name or isinstance(x, n.Store) and x.buffer == b.name:
                only_adds = False
            elif isinstance(x, n.AtomicRMW) and x.buffer == b.name and (x.op != "add" or x.dest is not None):
                only_adds = False
        if only_adds and _scatter_loops(s, b.name):
            out.append(b)
    return out


def _scatter_loops(s: n.Stmt, array: str) -> list[n.For]:
    """The innermost thread loops over x in ``s``, inside a serial loop, that scatter-add into ``array``."""
    finder = _ScatterLoops(array)
    finder.visit(s)
    return finder.found


class _ScatterLoops(Visitor):
    """Collects ``_scatter_loops``: thread loops over x with unit step, inside a serial loop
    (``for`` or ``while``), whose body scatters into the array (``_scatters``); the search
    does not enter the loops it finds."""

    def __init__(self, array: str):
        self.array = array
        self.found: list[n.For] = []
        self.serial = [False]  # inside a serial loop, innermost last

    def visit_Expr(self, e: n.Expr) -> None:
        return None  # expressions hold no loops

    def visit_For(self, s: n.For) -> None:
        if s.kind == "threads" and counter_dim(s.var) == 0 and self.serial[-1] and isinstance(s.step, n.Const) \
                and int(s.step.value) == 1 and _scatters(s.body, self.array):
            self.found.append(s)
            return
        self.serial.append(self.serial[-1] or s.kind == "serial")
        self.visit_block(s.body)
        self.serial.pop()

    def visit_While(self, s: n.While) -> None:
        self.serial.append(True)
        self.visit_block(s.body)
        self.serial.pop()


def _scatters(stmts: tuple[n.Stmt, ...], array: str) -> bool:
    """Whether an add into ``array`` at a loaded index lies in ``stmts`` outside nested loops,
    and none inside them. (A question about one block's top level and the branches of its
    ``if`` s, answered as soon as a nested loop adds: a recursion over blocks, not a Visitor.)"""
    direct = False
    for s in stmts:
        if isinstance(s, n.AtomicRMW) and s.buffer == array:
            direct = direct or any(isinstance(x, n.Load) for e in s.index for x in walk(e))
        elif isinstance(s, n.If):
            if not (_scatters(s.then, array) or _scatters(s.orelse, array)):
                if any(isinstance(x, n.AtomicRMW) and x.buffer == array for x in walk(s)):
                    return False
                continue
            direct = True
        elif any(isinstance(x, n.AtomicRMW) and x.buffer == array for x in walk(s)):
            return False  # in a nested loop
    return direct


class _Split(Mutator):
    """Each scatter loop of the statement unrolled by ``COPIES``, copy ``c`` adding into ``sub[c]``."""

    def __init__(self, array: str, sub: str, names: NameSupply, loops: list[n.For]):
        self.array, self.sub, self.names = array, sub, names
        self.loops = {id(loop) for loop in loops}

    def visit_For(self, s: n.For):
        if id(s) not in self.loops:
            return self.generic_visit(s)
        loc = s.loc
        start, stop = i64(s.start), i64(s.stop)
        trips = n.Call("max", (n.Binary("sub", stop, start), n.Const(0, I64)), I64)
        whole = n.Binary("sub", trips, n.Binary("rem", trips, n.Const(COPIES, I64)))
        quads = self.names.fresh(f"{stem_of(s.var)}_q")
        counter = self.names.fresh(f"{stem_of(s.var)}_u")
        decl = n.Decl(quads, U32, n.Cast(U32, n.Binary("add", start, whole)), loc=loc)
        unrolled: list[n.Stmt] = []
        for c in range(COPIES):
            tx = n.Binary("add", n.Var(counter, U32), n.Const(c, U32)) if c else n.Var(counter, U32)
            fresh = {name: self.names.fresh(stem_of(name)) for name in sorted(declared_names(s.body))}
            copy = rename_locals(s.body, fresh, values={n.Var(s.var, U32): tx})
            unrolled.extend(_Retarget(self.array, self.sub, c).visit_block(copy))
        main = n.For(counter, U32, s.start, n.Var(quads, U32), n.Const(COPIES, U32), tuple(unrolled),
                     kind="serial", loc=loc)
        rest = dataclasses.replace(s, start=n.Var(quads, U32))
        return (decl, main, rest)


class _Retarget(Mutator):
    def __init__(self, array: str, sub: str, copy: int):
        self.array, self.sub, self.copy = array, sub, copy

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> n.Stmt:
        if s.buffer != self.array:
            return s
        return dataclasses.replace(s, buffer=self.sub, index=(n.Const(self.copy, U32),) + tuple(s.index))


def _zero(sub: n.Buffer, size: int, names: NameSupply, loc) -> n.Stmt:
    """``sub[c][b] = 0`` for every copy ``c`` and element ``b``."""
    c, b = names.fresh("sub_c"), names.fresh("sub_b")
    store = n.Store(sub.name, (n.Var(c, U32), n.Var(b, U32)), n.Const(0, sub.elem), loc=loc)
    inner = n.For(b, U32, n.Const(0, U32), n.Const(size, U32), n.Const(1, U32), (store,), kind="serial", loc=loc)
    return n.For(c, U32, n.Const(0, U32), n.Const(COPIES, U32), n.Const(1, U32), (inner,), kind="serial", loc=loc)


def _merge(array: n.Buffer, sub: str, size: int, names: NameSupply, loc) -> n.Stmt:
    """``array[b] += sub[0][b] + ... + sub[COPIES - 1][b]`` for every element ``b``."""
    b = names.fresh("sub_b")
    total: n.Expr = n.Load(array.name, (n.Var(b, U32),), array.elem)
    for c in range(COPIES):
        total = n.Binary("add", total, n.Load(sub, (n.Const(c, U32), n.Var(b, U32)), array.elem))
    store = n.Store(array.name, (n.Var(b, U32),), total, loc=loc)
    return n.For(b, U32, n.Const(0, U32), n.Const(size, U32), n.Const(1, U32), (store,), kind="serial", loc=loc)
