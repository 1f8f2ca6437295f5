"""distribute_thread_loops: loop fission of thread loops into independent parts (CPU form -> CPU form).

Requires: a CPU-form kernel (thread counters named ``tx``/``ty``/``tz``, see
``gpu2cpu.thread_affine``). Guarantees: the same results; a thread loop whose body is made of
consecutive runs of statements that share no local declared in the body becomes one thread loop
per run::

    for threads tx {               for threads tx { var a = x[tx]; y[tx] = a }
      var a = x[tx]; y[tx] = a ==> for threads tx_1 { if (tx_1 < 3) { z[tx_1] = 0 } }
      if (tx < 3) { z[tx] = 0 }
    }

Legal because the iterations of a thread loop are the threads of one barrier interval of a
race-free kernel (``gpu2cpu.thread_loops``): no value flows between the parts through a
per-thread local, and memory one thread writes in an earlier part it reads back in a later one,
after every thread ran the earlier part. Not done when the order in which threads run matters
(``order_sensitive`` atomics). The first part keeps the loop's names; the others get fresh
ones (names are unique in a kernel).

``fission_chunks`` and ``fission_parts`` do the work for one loop: ``tighten_thread_bounds``
uses them (step 1) where a part holds a guard that can become the bounds of its own loop;
``distribute_thread_loops`` is the pass on its own, cutting every thread loop it can.
``report`` receives one ``LoweringDecision`` per loop cut.
"""
from __future__ import annotations

from collections.abc import Iterator

from gpu2cpu.names import NameSupply
from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_affine import counter_dim
from gpu2cpu.thread_loops import copy_loop, independent_chunks, order_sensitive, rewrite_cpu_body, ThreadLoopStep
from polypy.ir import nodes as n


def distribute_thread_loops(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Every thread loop cut into its independent parts; see the module docstring."""
    return rewrite_cpu_body(kernel, _Distribute, what="distribute_thread_loops", report=report)


def fission_chunks(kernel: n.Kernel, loop: n.For) -> list[tuple[n.Stmt, ...]]:
    """The independent parts of ``loop``'s body, in order; [] when it stays one loop (a single
    part, atomics whose results depend on the order of the threads, or an ``ordered`` loop,
    whose threads' later parts may read what earlier threads wrote)."""
    if loop.ordered or len(loop.body) < 2 or order_sensitive(kernel, loop.body):
        return []
    chunks = independent_chunks(loop.body)
    return chunks if len(chunks) > 1 else []


def fission_parts(loop: n.For, chunks: list[tuple[n.Stmt, ...]], names: NameSupply) -> Iterator[n.For]:
    """One thread loop per chunk: the first with ``loop``'s names, the others with fresh ones,
    each made when it is taken (so that the caller's own fresh names interleave in order)."""
    for i, chunk in enumerate(chunks):
        yield copy_loop(loop, names, body=chunk, fresh=i > 0)


class _Distribute(ThreadLoopStep):
    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        loop = self.generic_visit(s)  # inner loops first
        if not (loop.kind == "threads" and counter_dim(loop.var) is not None):
            return loop
        chunks = fission_chunks(self.kernel, loop)
        if not chunks:
            return loop
        self.note(loop, f"thread loop over {loop.var}: distributed into {len(chunks)} thread loops (loop fission)")
        return tuple(fission_parts(loop, chunks, self.names))
