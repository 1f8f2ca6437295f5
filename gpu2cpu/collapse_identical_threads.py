"""collapse_identical_threads: a block's threads that only an unread thread index tells apart run once.

Requires: GPU form. Guarantees: the result of a schedule CUDA allows: the same results as every
schedule where the kernel's results do not depend on one (below).

A kernel that never reads ``threadIdx.y`` (say), launched with ``blockDim.y`` = 8, has eight
threads per ``threadIdx.x`` that execute the same code on the same values: *identical threads*.
PolyBench's MVT launches 32x8 blocks for ``x1[i] += a[i*N + j] * y1[j]`` with ``i`` from
``threadIdx.x`` alone. The pass keeps one of them::

    body                ==>     if (threadIdx.y == 0 && threadIdx.z == 0) { body }

and ``tighten-thread-bounds`` then gives the ``ty``/``tz`` thread loops a single trip.

Why the results stay right. Run identical threads in lockstep: at each step all of them do the
same memory operation, a load (each sees the same value) or a store (each stores the same value).
That schedule is one CUDA allows, and its result is exactly that of one thread alone.
* Identical threads that store race by CUDA's rules (two threads, one location; the emulator
  reports it). When every copy stores what the others store (``x[i] = f(a[i])``), every schedule
  gives the one result that one copy gives.
* When the copies read what they store (MVT: eight read-modify-writes of ``x1[i]``), schedules
  differ, and the kernel gets the lockstep one. That is also what a GPU gives in practice, where
  each copy keeps ``x1[i]`` in a register over the loop and stores the same sum. Running the
  copies one after another would add the sum eight times, which is another legal result, and
  not the one PolyBench checks for.
* A kernel without stores to memory that copies share (only loads, or a copy per dimension that
  is read) is unchanged by the guard in every case.

Not applied when the lockstep argument does not hold or the guard would be illegal:
* atomics (eight atomic adds are eight additions);
* warp shuffles and votes (they combine lanes; a vote over copies counts them);
* barriers (a barrier under ``threadIdx.y == 0`` is not reached by every thread).
A dimension is collapsed when no expression of the kernel reads its ``threadIdx``; ``blockDim``
may be read (it is the same in every thread).
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.types import U32
from polypy.ir.visitor import rebuild, walk_only

from gpu2cpu.report import LoweringDecision

# statements whose effect depends on how many threads execute them, or that must be reached by all
_COUNTING = (n.AtomicRMW, n.Shuffle, n.Vote, n.Barrier, n.Print, n.Launch)  # each copy prints, launches


def identical_thread_dims(kernel: n.Kernel) -> tuple[int, ...]:
    """The dimensions (0, 1, 2 for x, y, z) whose ``threadIdx`` nothing in ``kernel`` reads, when
    the kernel does nothing that counts its threads; ``()`` otherwise."""
    read: set[int] = set()
    for x in walk_only(kernel, _COUNTING, n.ThreadIdx):
        if isinstance(x, _COUNTING):
            return ()
        if isinstance(x, n.ThreadIdx):
            read.add(x.dim)
    return tuple(d for d in (0, 1, 2) if d not in read)


def collapse_identical_threads(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Guard the body with ``threadIdx.d == 0`` for every dimension ``d`` of identical threads.
    ``report`` receives one ``LoweringDecision`` when it does."""
    dims = identical_thread_dims(kernel)
    if not dims or not kernel.body:
        return kernel
    if report is not None:
        names = ", ".join(f"threadIdx.{'xyz'[d]}" for d in dims)
        report.append(LoweringDecision(kernel.name, kernel.loc, f"nothing reads {names}: threads that differ only "
                                                                f"there are identical and run once (the lockstep schedule)"))
    cond: n.Expr | None = None
    for d in dims:
        test = n.Binary("eq", n.ThreadIdx(d), n.Const(0, U32))
        cond = test if cond is None else n.Binary("land", cond, test)
    assert cond is not None
    # located where the body starts: the thread-loop nests built from it keep their source line
    return rebuild(kernel, body=(n.If(cond, kernel.body, (), loc=kernel.body[0].loc),))
