"""prefetch_grid_stride: a grid-stride loop prefetches the elements it reads two iterations ahead.

Requires: a CPU-form kernel. Guarantees: the same results (a prefetch is a hint that touches
nothing); each *grid-stride loop* left by ``normalize_grid_stride``::

    for i_base: i64 = S to E step D {              D reads gridDim: the grid's stride
      ...
      for threads tx ... { ... X[i_base + (i64)tx + c] ... }
    }

starts each iteration with prefetches of what that read takes two iterations later, one per
64-byte cache line of the block's stretch::

      for pf: i64 = 0 to (i64)blockDim.x + L - 1 step L { prefetch X[i_base + 2 * D + pf + c] }

(``L = 64 / sizeof(X)`` elements per cache line; the ``L - 1`` more reach the last line of a
stretch that does not start at a line boundary, as NumPy's arrays often do not).

Why: one block of a grid-stride loop reads ``blockDim.x`` consecutive elements and then jumps
``blockDim.x * gridDim.x`` elements ahead (64 KiB for a histogram of bytes with 256 blocks of
256 threads). On a GPU the other blocks read the gap at the same time; on a CPU one worker runs
the block alone, the hardware prefetchers do not follow 64 KiB strides across pages, and every
stretch waits for memory: the loop is latency-bound. Two iterations ahead keeps a few stretches
in flight (measured on the bench's histogram, 32 MiB of bytes on two cores, with the scatter loop
unrolled: 5.6-7.0 ms -> 4.0-4.3 ms wherever the array starts; hand-written OpenMP 3.3 ms).

Only global arrays (pointer parameters) read with an index that is the loop variable plus the x
thread counter plus a grid-uniform offset are prefetched; the prefetched address may lie past
the array's end, which a prefetch never faults on. ``report`` receives one line per loop.
"""
from __future__ import annotations

import dataclasses

from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_affine import counter_dim
from gpu2cpu.thread_loops import ThreadLoopStep, let_definitions, rewrite_cpu_body
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.queries import substitute_lets, written_names
from polypy.ir.rewrite import signed_terms
from polypy.ir.types import I64, PointerType
from polypy.ir.visitor import walk

DISTANCE = 2  # iterations ahead
LINE = 64  # bytes per cache line


def prefetch_grid_stride(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Prefetches at the top of each grid-stride loop; see the module docstring."""
    return rewrite_cpu_body(kernel, _Prefetch, what="prefetch_grid_stride", report=report)


class _Prefetch(ThreadLoopStep):
    def __init__(self, kernel: n.Kernel):
        super().__init__(kernel)
        self.assigned = written_names(kernel)

    def visit_For(self, s: n.For) -> n.Stmt:
        s = self.generic_visit(s)
        if not (s.kind == "serial" and s.vtype == I64 and any(isinstance(x, n.GridDim) for x in walk(s.step))):
            return s
        targets: dict[tuple[str, str], n.Expr] = {}  # (buffer, offset) -> the offset c
        for loop in s.body:
            for x in walk(loop):
                if isinstance(x, n.For) and x.kind == "threads" and counter_dim(x.var) == 0:
                    # the thread's bindings looked through (``var i: i64 = i_base + (i64)tx``,
                    # indices ``x[i + (i64)shift]``); exact where the index matches: what it
                    # then reads is assigned nowhere in the loop
                    values = let_definitions(x.body, len(x.body))
                    for load in walk(x):
                        if isinstance(load, n.Load):
                            offset = self._offset(load, substitute_lets(load.index[0], values) if load.index else None,
                                                  s.var, x.var)
                            if offset is not None:
                                targets.setdefault((load.buffer, format_expr(offset)), offset)
        if not targets:
            return s
        ahead = n.Binary("add", n.Var(s.var, I64), n.Binary("mul", n.Const(DISTANCE, I64), s.step))
        prefetches: list[n.Stmt] = []
        for (buffer, _), offset in targets.items():
            elem = self.kernel.param(buffer).ptype.elem  # type: ignore[union-attr]
            per_line = max(LINE // elem.itemsize, 1)
            pf = self.names.fresh("pf")
            index = n.Binary("add", n.Binary("add", ahead, n.Var(pf, I64)), offset)
            # every line the stretch touches, also where it does not start at a line boundary
            stop = n.Binary("add", n.Cast(I64, n.BlockDim(0)), n.Const(per_line - 1, I64))
            prefetches.append(n.For(pf, I64, n.Const(0, I64), stop, n.Const(per_line, I64),
                                    (n.Prefetch(buffer, (index,)),)))
        self.note(s, f"grid-stride loop over {s.var}: prefetches {', '.join(sorted({b for b, _ in targets}))} "
                     f"{DISTANCE} iterations ahead (one block reads a stretch, then jumps a grid ahead)")
        return dataclasses.replace(s, body=tuple(prefetches) + s.body)

    def _offset(self, load: n.Load, index: n.Expr | None, base: str, counter: str) -> n.Expr | None:
        """``c`` where ``load`` reads ``X[base + (i64)counter + c]`` of a pointer parameter ``X``
        with ``c`` grid-uniform (made of constants, launch dimensions and unassigned arguments);
        ``index``: its index with the thread loop's bindings substituted."""
        p = self.kernel.param(load.buffer)
        if p is None or not isinstance(p.ptype, PointerType) or len(load.index) != 1 or index is None:
            return None
        if index.type != I64:
            return None
        terms = signed_terms(index)
        rest: n.Expr = n.Const(0, I64)
        seen_base = seen_counter = False
        for sign, t in terms:
            if isinstance(t, n.Var) and t.name == base and sign > 0 and not seen_base:
                seen_base = True
            elif _is_counter(t, counter) and sign > 0 and not seen_counter:
                seen_counter = True
            elif self._uniform(t):
                rest = n.Binary("add" if sign > 0 else "sub", rest, t if t.type == I64 else n.Cast(I64, t))
            else:
                return None
        return rest if seen_base and seen_counter else None

    def _uniform(self, e: n.Expr) -> bool:
        for x in walk(e):
            if isinstance(x, (n.Load, n.ThreadIdx)):
                return False
            if isinstance(x, n.Var):
                p = self.kernel.param(x.name)
                if p is None or isinstance(p.ptype, PointerType) or x.name in self.assigned:
                    return False
        return True


def _is_counter(e: n.Expr, counter: str) -> bool:
    if isinstance(e, n.Cast) and e.to == I64 and e.x.type.is_int and e.x.type.bits <= 32 and not e.x.type.is_signed:
        e = e.x  # (i64) of the unsigned counter: its value
    return isinstance(e, n.Var) and e.name == counter

