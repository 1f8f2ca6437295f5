"""divide_in_double: 32-bit integer ``/`` and ``%`` by a variable, in thread loops, computed in f64.

Requires: a CPU-form kernel. Guarantees: the same values (below); afterwards no innermost thread
loop divides 32-bit integers by a non-constant divisor.

Why: x86 has no vector integer division, so a compiler cannot vectorize a loop that divides by
a run-time value -- GCC gives up on the whole loop. CUDA code divides by arguments to turn a
linear thread index into coordinates (Rodinia's srad: ``row = (ei + 1) % Nr - 1; col = (ei + 1) /
Nr``), and then its whole thread loop runs one lane at a time. A double-precision division
vectorizes::

    q = a / b    ==>   q = (i32)(i64)((f64)a / (f64)b)
    r = a % b    ==>   r = (i32)((i64)a - (i64)((f64)a / (f64)b) * (i64)b)

Exactness. For 32-bit ``a`` and ``b != 0`` the conversions to f64 are exact, and the rounded
quotient truncates to C's quotient: ``|a / b|`` lies at least ``1 / |b|`` below the next integer
away from zero, while rounding moves it by at most ``2**-53 * |a / b| < 1 / |b|`` (as
``|a| < 2**53``), so it neither reaches that integer nor falls below the truncated one
(an exact integer quotient is exact in f64); the conversion to i64 truncates toward zero, as
C's division does. ``INT_MIN / -1`` gives ``2**31``, which i64 holds and the conversion to i32
wraps to ``INT_MIN``, and ``INT_MIN % -1`` gives 0: the IR's wrapped results. The remainder
``a - q * b`` is computed in i64, where nothing overflows, and is C's remainder since ``q`` is
C's quotient. Unsigned operands go the same way (their quotient and remainder fit i64). A zero
divisor is undefined behaviour (the emulator reports it), as before.

Only innermost thread loops (what the backends vectorize) are rewritten, and only divisors made
of the kernel's arguments (and memory): constants, launch dimensions (constants in a version
specialized for its block shape) and loop variables (constants where a loop is unrolled, a tree
reduction's ``(tid + 1) % i``) are left to the compilers, which multiply by a reciprocal.
``report`` receives one line per thread loop changed.
"""
from __future__ import annotations

import dataclasses

from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_loops import ThreadLoopStep, rewrite_cpu_body
from polypy.ir import nodes as n
from polypy.ir.types import F64, I64
from polypy.ir.visitor import Mutator, walk, walk_only

_TYPES = ("i32", "u32")


def divide_in_double(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Integer divisions by variables in innermost thread loops computed in f64; see the module docstring."""
    return rewrite_cpu_body(kernel, _Divide, what="divide_in_double", report=report)


class _Divide(ThreadLoopStep):
    def visit_For(self, s: n.For) -> n.Stmt:
        if s.kind != "threads" or any(x.kind == "threads" for x in walk_only(s.body, n.For)):
            return self.generic_visit(s)
        rewrite = _Rewrite(frozenset(p.name for p in self.kernel.params))
        body = rewrite.visit_block(s.body)
        if body is s.body:
            return s
        self.note(s, f"thread loop over {s.var}: {rewrite.count} integer division(s) by a variable computed in "
                     f"double precision (exact for 32-bit operands), so that the loop vectorizes")
        return dataclasses.replace(s, body=body)


def divide_block_in_double(block: tuple[n.Stmt, ...], params: frozenset[str]) -> tuple[n.Stmt, ...]:
    """``block`` (the body of an innermost thread loop) with its divisions by the arguments
    ``params`` computed in f64: for a pass whose run-time check keeps the loop as written as its
    fallback, which this pass does not visit (``ThreadLoopStep``)."""
    return _Rewrite(params).visit_block(block)


class _Rewrite(Mutator):
    def __init__(self, params: frozenset[str]) -> None:
        self.params = params
        self.count = 0

    def visit_Binary(self, e: n.Binary) -> n.Expr:
        e = self.generic_visit(e)
        if not (isinstance(e, n.Binary) and e.op in ("div", "rem") and e.a.type.name in _TYPES
                and e.b.type == e.a.type and _argument(e.b, self.params)):
            return e
        self.count += 1
        ty = e.a.type
        quotient = n.Binary("div", n.Cast(F64, e.a, loc=e.loc), n.Cast(F64, e.b, loc=e.loc), loc=e.loc)
        q = n.Cast(I64, quotient, loc=e.loc)  # exact: |q| <= 2**32
        if e.op == "div":
            return n.Cast(ty, q, loc=e.loc)
        product = n.Binary("mul", q, n.Cast(I64, e.b, loc=e.loc), loc=e.loc)
        return n.Cast(ty, n.Binary("sub", n.Cast(I64, e.a, loc=e.loc), product, loc=e.loc), loc=e.loc)


def _argument(e: n.Expr, params: frozenset[str]) -> bool:
    """Whether ``e`` is a value of the launch's arguments: it reads a parameter or memory, and no
    other variable (a loop's ``i *= 2`` becomes a constant where the loop is unrolled)."""
    variables = [x.name for x in walk_only(e, n.Var)]
    return all(v in params for v in variables) and (bool(variables) or any(isinstance(x, n.Load) for x in walk(e)))
