"""Versions for arrays apart: the pointer parameters a kernel writes declared ``restrict``.

A C compiler must assume that a kernel's store through one pointer parameter may change what
another one points to. In a loop over threads that loads the same element in every iteration
(conv2d's ``mask[(dy + 2) * 5 + dx + 2]``, inside the vector loop over ``tx``), the store to
``out`` at the end of each iteration then forces the compiler to load all 25 taps again in the
next one. Declared ``restrict``, ``out`` cannot change them: GCC keeps them in vector registers
across the loop (the bench's conv2d through C, 4096 x 4096: 11.5-13.4 ms -> 8.5-9.1 ms, against
the OpenMP port's 10.8-12.7 ms; ``bench/README.md``, "stop 33").

That declaration is a promise the caller must keep: during a launch, nothing the kernel writes
through such a parameter is read or written through any other name. It holds when each written
pointer argument points into its own allocation and the kernel stays inside its arrays, as a
CUDA kernel must (an access outside the array a pointer points into is undefined behaviour). So
the version is chosen at run time, launch by launch, and only then:

* a whole program (``codegen.c.module.emit_program``): every written pointer argument lies in a
  ``cudaMalloc`` allocation (polypy's runtime registry) that holds no other pointer argument
  (``polypy_rt_apart``); a pointer the registry does not know (a ``__device__`` array's address, a
  host array) runs the version without ``restrict``;
* a kernel library: through its second entry point ``K_launch_apart``, which ``codegen.c.build.CLibrary``
  calls for NumPy arguments where no other argument views the storage of a written one (two views
  of one array are not apart, as two pointers into one ``cudaMalloc`` block are not) and the
  library has no module arrays the kernel could reach by name; ``K_launch`` never assumes it;
* the Python API (``polypy.compile``, LLVM: the restrict pointers are ``noalias``): a launch
  whose arrays are proven in bounds and share no memory pairwise (``np.may_share_memory``).

Versions specialized for a block shape get such a twin, and in a whole program the default
kernel too (the one its launches of a block shape known only at run time run: Rodinia b+tree's
``<<<count, order>>>``, guarded by the arrays being apart alone), and only where it can pay
(``apart_twin``): a loop over threads that loads, at an index the same for all its threads, from a
pointer parameter that a store in that loop may alias. Elsewhere the compiler's own run-time
overlap checks of vectorized loops already do what ``restrict`` would (PolyBench-style GEMM measured
2.4x -> 2.1x against its port with every pointer ``restrict``), and the twin would only double the
compile time.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.queries import written_names
from polypy.ir.types import PointerType
from polypy.ir.visitor import walk, walk_block
from polypy.poly.alias import alias_kind


def written_pointers(kernel: n.Kernel) -> list[str]:
    """The pointer parameters ``kernel`` stores to (or updates atomically), in parameter order."""
    stored = {x.buffer for x in walk(kernel) if isinstance(x, (n.Store, n.AtomicRMW))}
    return [p.name for p in kernel.params if isinstance(p.ptype, PointerType) and p.name in stored]


def apart_twin(kernel: n.Kernel) -> n.Kernel | None:
    """``kernel`` with the pointer parameters it writes declared ``restrict``, where that can pay
    (see the module docstring); None where it cannot, or where its pointers come from a table
    (``T**`` parameters, pointers in ``__constant__`` records: the launcher finds the pool, which
    the dispatcher does not see)."""
    if any(path in (n.TABLE_POOL, n.TABLE_BASE) for sp in kernel.source_params for path, _ in sp.members) or \
            kernel.held_pointers:  # (the pools of pointers read from __constant__ records: likewise)
        return None
    written = set(written_pointers(kernel)) - restricted(kernel)
    if not written or not _reloads(kernel, written):
        return None
    return with_restrict(kernel, written)


def restricted(kernel: n.Kernel) -> set[str]:
    """The pointer parameters of ``kernel`` declared ``restrict``."""
    return {p.name for p in kernel.params if isinstance(p.ptype, PointerType) and p.ptype.restrict}


def with_restrict(kernel: n.Kernel, names: set[str]) -> n.Kernel:
    """``kernel`` with the pointer parameters ``names`` declared ``restrict`` (a coarse version
    gets those of its fine version's twin)."""
    params = tuple(dataclasses.replace(p, ptype=dataclasses.replace(p.ptype, restrict=True)) if p.name in names
                   else p for p in kernel.params)
    return dataclasses.replace(kernel, params=params)


def _reloads(kernel: n.Kernel, written: set[str]) -> bool:
    """Whether an innermost loop over threads loads, at an index that is the same in every
    iteration, from a pointer parameter that one of its stores to ``written`` may alias."""
    for loop in walk(kernel):
        if not isinstance(loop, n.For) or loop.kind != "threads" or loop.ordered:
            continue
        if any(isinstance(x, n.For) and x.kind == "threads" for x in walk_block(loop.body)):
            continue  # not innermost
        stores = {x.buffer for x in walk_block(loop.body) if isinstance(x, (n.Store, n.AtomicRMW))} & written
        if not stores:
            continue
        varying = _varying(loop)
        for x in walk_block(loop.body):
            if (isinstance(x, n.Load) and kernel.param(x.buffer) is not None
                    and any(alias_kind(kernel, w, x.buffer) == "any" for w in stores)
                    and not any(isinstance(y, n.Load) for e in x.index for y in walk(e))
                    and not any(isinstance(y, n.Var) and y.name in varying for e in x.index for y in walk(e))):
                return True
    return False


def _varying(loop: n.For) -> set[str]:
    """The names whose value may differ between iterations of ``loop``: its counter, the locals its
    body assigns, the bindings it declares whose value reads a load or one of those
    (``let c = y * nx + x``), and the counters of inner loops whose bounds depend on those (an
    inner loop over the same constant range in every iteration, conv2d's ``dy``, gives every
    iteration the same values)."""
    varying = {loop.var} | (written_names(loop.body) - _inner_counters(loop.body))
    changed = True
    while changed:
        changed = False
        for x in walk_block(loop.body):
            if isinstance(x, n.Decl) and x.init is not None and x.name not in varying:
                if any(isinstance(y, n.Load) or (isinstance(y, n.Var) and y.name in varying) for y in walk(x.init)):
                    varying.add(x.name)
                    changed = True
            if isinstance(x, n.For) and x.var not in varying:
                bounds = [y for e in (x.start, x.stop, x.step) for y in walk(e)]
                if any(isinstance(y, n.Load) or (isinstance(y, n.Var) and y.name in varying) for y in bounds):
                    varying.add(x.var)
                    changed = True
    return varying


def _inner_counters(body: tuple[n.Stmt, ...]) -> set[str]:
    return {x.var for x in walk_block(body) if isinstance(x, n.For)}
