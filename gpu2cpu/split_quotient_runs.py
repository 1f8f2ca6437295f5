"""split_quotient_runs: a thread loop that divides its linear index by a run-time value, cut into
the runs of threads that share the quotient.

Requires: a CPU-form kernel. Guarantees: the same values; a thread loop rewritten runs its threads
in the same order (consecutive pieces of its range), with ``(B + tx) / d`` a scalar computed once
per piece and ``(B + tx) % d`` affine in the counter; where a loop changed, ``tighten_thread_bounds``
runs again on the kernel (conditions on the remainder become ranges of the counter).

Why: CUDA code turns a linear thread index into coordinates (Rodinia's srad_v1: ``row = (ei + 1) %
Nr - 1; col = (ei + 1) / Nr``, with ``ei = blockIdx.x * 512 + threadIdx.x``). Divided per thread
(``divide_in_double``, which runs after this pass), the loop vectorizes, but every access through
``row`` or ``col`` is a gather: ``d_jE[col]`` and ``d_c[row + Nr * d_jE[col]]``. Over the threads
whose quotient is the same, ``col`` is one value and ``row`` steps by one, so those accesses are a
broadcast and a contiguous load, and there is no division left in the loop::

    for threads tx = lo to hi {                 if ((i64)d >= 32l && (i64)B + (i64)lo >= 0l
      ... (B + (i32)tx) / d ...                       && (i64)B + (i64)hi - 1l <= 2147483647l) {
      ... (B + (i32)tx) % d ...           =>      var t: u32 = lo
    }                                             while (t < hi) {
                                                    var q: i32 = (B + (i32)t) / d
                                                    var e: u32 = (u32)min((i64)hi, (i64)(q + 1) * (i64)d - (i64)B)
                                                    for threads tx = t to e {
                                                      ... q ... (B + (i32)tx) - q * d ...
                                                    }
                                                    t = e
                                                  }
                                                } else { the loop as written }

Exact: ``B`` (the numerator less the counter, 32-bit wrapped as the program computes it) and ``d``
are the same for every thread (no variable of the loop's body, no memory, no call). Where the
check holds, ``B + tx`` is not negative and does not wrap for any thread of the loop, so C's
``/`` and ``%`` by ``d > 0`` are the floor quotient and its remainder: ``q`` for the threads from
``t`` to the first one whose numerator reaches ``(q + 1) * d`` (each piece holds at least one
thread), and ``a - q * d`` (no overflow: it lies between 0 and ``a``). A divisor below 32 would
cut the loop into pieces too short to be worth it: the check sends those launches to the loop as
written, as it does numerators that could be negative or wrap. Only innermost thread loops without
``break``, ``continue`` or ``return`` are rewritten, for the first numerator and divisor pair found
(32-bit signed); ``report`` receives one line per loop.
"""
from __future__ import annotations

import dataclasses

from gpu2cpu.divide_in_double import divide_block_in_double
from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_loops import ThreadLoopStep, rewrite_cpu_body
from gpu2cpu.tighten_thread_bounds import tighten_thread_bounds
from polypy.ir import nodes as n
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import I32, I64, U32
from polypy.ir.visitor import Mutator, walk, walk_only

MIN_DIVISOR = 32
_INT32 = (I32, U32)


def split_quotient_runs(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Thread loops that divide their linear index by a run-time value, run per quotient; see the module docstring."""
    out = rewrite_cpu_body(kernel, _Split, what="split_quotient_runs", report=report)
    # In a run the remainder is affine in the counter: conditions on it (srad's ``(ei + 1) % Nr ==
    # 0``, one thread of the run) are decided per range now, and loads through it become affine.
    return out if out is kernel else tighten_thread_bounds(out, report=report)


class _Split(ThreadLoopStep):
    def visit_For(self, s: n.For) -> n.Stmt:
        if s.kind != "threads" or any(x.kind == "threads" for x in walk_only(s.body, n.For)):
            return self.generic_visit(s)
        if s.vtype != U32 or not _is_one(s.step) or any(isinstance(x, (n.Break, n.Continue, n.Return)) for x in _walk_block(s.body)):
            return s
        local = _body_names(s)
        if not (_invariant(s.start, local) and _invariant(s.stop, local)):
            return s
        counter = n.Var(s.var, s.vtype)
        params = frozenset(p.name for p in self.kernel.params)
        pair = _first_pair(s.body, counter, local, params)
        if pair is None:
            return s
        base, divisor = pair
        return self._rewrite(s, counter, base, divisor, params)

    def _rewrite(self, s: n.For, counter: n.Var, base: n.Expr, divisor: n.Expr, params: frozenset[str]) -> n.Stmt:
        loc = s.loc
        t = n.Var(self.names.fresh(f"{s.var}_run"), U32)
        q = n.Var(self.names.fresh(f"{s.var}_quot"), I32)
        e = n.Var(self.names.fresh(f"{s.var}_run_end"), U32)
        body = _Replace(counter, base, divisor, q).visit_block(s.body)
        b64, d64 = n.Cast(I64, base, loc=loc), n.Cast(I64, divisor, loc=loc)
        check = _all(
            n.Binary("ge", d64, n.Const(MIN_DIVISOR, I64), loc=loc),
            n.Binary("ge", n.Binary("add", b64, n.Cast(I64, s.start, loc=loc), loc=loc), n.Const(0, I64), loc=loc),
            n.Binary("le", n.Binary("add", b64, n.Cast(I64, s.stop, loc=loc), loc=loc), n.Const(2 ** 31, I64), loc=loc),
        )
        numerator_at_t = n.Binary("add", base, n.Cast(I32, t, loc=loc), loc=loc)
        next_q = n.Binary("mul", n.Cast(I64, n.Binary("add", q, n.Const(1, I32), loc=loc), loc=loc), d64, loc=loc)
        end = n.Call("min", (n.Cast(I64, s.stop, loc=loc), n.Binary("sub", next_q, b64, loc=loc)), I64, loc=loc)
        # The loop as written stays as the fallback: the copy declares fresh names.
        declared = [s.var] + [x.var if isinstance(x, n.For) else x.name for x in _walk_block(s.body)
                              if isinstance(x, (n.Decl, n.For))]
        declared += [x.dest for x in _walk_block(s.body)
                     if isinstance(x, (n.AtomicRMW, n.Shuffle, n.Vote)) and x.dest]
        mapping = {name: self.names.fresh(name) for name in dict.fromkeys(declared)}
        run = rename_locals(dataclasses.replace(s, start=t, stop=e, body=body), mapping)
        loop = n.While(n.Binary("lt", t, s.stop, loc=loc), (
            n.Decl(q.name, I32, n.Binary("div", numerator_at_t, divisor, loc=loc), loc=loc),
            n.Decl(e.name, U32, n.Cast(U32, end, loc=loc), loc=loc),
            run,
            n.Assign(t.name, e, loc=loc),
        ), loc=loc)
        self.note(s, f"thread loop over {s.var}: run per value of the quotient by a run-time divisor (at least "
                     f"{MIN_DIVISOR}, checked), so that it is one value per run and the remainder steps with the thread")
        # The fallback (a divisor below MIN_DIVISOR, a numerator that could wrap) divides in
        # double precision, as divide-in-double would have done with the loop.
        fallback = dataclasses.replace(s, body=divide_block_in_double(s.body, params))
        return n.If(check, (n.Decl(t.name, U32, s.start, loc=loc), loop), (fallback,), loc=loc)


def _all(*conds: n.Expr) -> n.Expr:
    out = conds[0]
    for c in conds[1:]:
        out = n.Binary("land", out, c, loc=c.loc)
    return out


def _is_zero(e: n.Expr) -> bool:
    return isinstance(e, n.Const) and e.value == 0


def _is_one(e: n.Expr) -> bool:
    return isinstance(e, n.Const) and e.value == 1


def _body_names(s: n.For) -> frozenset[str]:
    """Names the loop declares or assigns (its counter included)."""
    names = {s.var}
    for x in _walk_block(s.body):
        if isinstance(x, (n.Decl, n.Assign)):
            names.add(x.name)
        elif isinstance(x, n.For):
            names.add(x.var)
        elif isinstance(x, n.AtomicRMW) and x.dest:
            names.add(x.dest)
        elif isinstance(x, (n.Shuffle, n.Vote)):
            names.add(x.dest)
    return frozenset(names)


def _invariant(e: n.Expr, local: frozenset[str]) -> bool:
    """The same value for every thread of the loop: no variable of the loop, no memory, no call."""
    for x in walk(e):
        if isinstance(x, (n.Load, n.Call, n.ThreadIdx)) or (isinstance(x, n.Var) and x.name in local):
            return False
    return True


def _first_pair(body: tuple[n.Stmt, ...], counter: n.Var, local: frozenset[str],
                params: frozenset[str]) -> tuple[n.Expr, n.Expr] | None:
    """``(B, d)`` of the first 32-bit signed ``(B + counter) / d`` or ``% d`` in ``body`` whose
    divisor is made of the kernel's scalar arguments (a block-level loop's counter, ``(tx + 1) %
    i`` of a tree reduction, becomes a constant where the loop is unrolled: left alone)."""
    for x in _walk_block(body):
        if isinstance(x, n.Binary) and x.op in ("div", "rem") and x.type == I32 and x.b.type == I32 \
                and not isinstance(x.b, n.Const) and _invariant(x.b, local) \
                and all(v.name in params for v in walk_only(x.b, n.Var)) and any(True for _ in walk_only(x.b, n.Var)):
            base = _base(x.a, counter)
            if base is not None and _invariant(base, local):
                return base, x.b
    return None


def _base(e: n.Expr, counter: n.Var) -> n.Expr | None:
    """``B`` with ``e == B + counter`` modulo 2**32 (``e`` of a 32-bit integer type, ``B`` of
    ``e``'s type), or None where ``e`` is not such a sum."""
    if e.type not in _INT32:
        return None
    if e == counter:
        return n.Const(0, e.type)
    if isinstance(e, n.Cast) and e.x == counter:
        return n.Const(0, e.type)
    if isinstance(e, n.Cast) and e.x.type in _INT32:
        inner = _base(e.x, counter)
        return None if inner is None else n.Cast(e.type, inner, loc=e.loc)
    if isinstance(e, n.Binary) and e.op in ("add", "sub") and e.b.type == e.type:
        a_has, b_has = _reads(e.a, counter), _reads(e.b, counter)
        if a_has and not b_has:
            inner = _base(e.a, counter)
            if inner is None:
                return None
            if _is_zero(inner):
                return e.b if e.op == "add" else n.Unary("neg", e.b, loc=e.loc)
            return n.Binary(e.op, inner, e.b, loc=e.loc)
        if e.op == "add" and b_has and not a_has:
            inner = _base(e.b, counter)
            if inner is None:
                return None
            return e.a if _is_zero(inner) else n.Binary("add", e.a, inner, loc=e.loc)
    return None


def _walk_block(block: tuple[n.Stmt, ...]):
    for stmt in block:
        yield from walk(stmt)


def _reads(e: n.Expr, v: n.Var) -> bool:
    return any(x == v for x in walk(e))


class _Replace(Mutator):
    """``(B + counter) / d`` -> ``q``, ``(B + counter) % d`` -> ``(B + counter) - q * d``."""

    def __init__(self, counter: n.Var, base: n.Expr, divisor: n.Expr, q: n.Var):
        self.counter, self.base, self.divisor, self.q = counter, base, divisor, q

    def visit_Binary(self, e: n.Binary) -> n.Expr:
        e = self.generic_visit(e)
        if not (isinstance(e, n.Binary) and e.op in ("div", "rem") and e.type == I32 and e.b == self.divisor
                and _base(e.a, self.counter) == self.base):
            return e
        if e.op == "div":
            return self.q
        return n.Binary("sub", e.a, n.Binary("mul", self.q, self.divisor, loc=e.loc), loc=e.loc)
