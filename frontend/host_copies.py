"""Copies between host and device a CPU need not make: one array serves as both.

On a GPU, ``cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)`` moves data to another memory. On the
CPU both arrays live in one memory, and the copy only costs: the pages of the fresh device array
are cleared by the kernel at their first touch, then every byte moves. Rodinia's nw copies two
64 MiB arrays that way before its kernels start, and its 64 MiB result back into a fresh host
array after them; its OpenMP port computes in the host arrays.

**To the device** (``_Share``): the device array becomes the host buffer.

CUDA promises two distinct arrays with equal contents after the copy. One array serves as both
wherever neither is changed while the other is still read:

* the host never writes ``h`` after the copy;
* if anything writes ``d`` after the copy (a launch whose kernel stores to that parameter, a
  copy or fill into ``d``), the host never reads ``h`` after the copy.

Every other way the two could be told apart is ruled out by refusing programs that use them in
any way this module does not follow. It proves, in one host function ``F``:

* ``F`` has no ``goto``; the copy is not inside a loop, a ``switch`` or a lambda of ``F`` (so the
  statements that run after it are the ones that follow it in the text), and is spelled in the
  file, not produced by a macro.
* ``d`` is a local (not ``static``) pointer, declared without initializer or with a null one,
  given memory by exactly one ``cudaMalloc(&d, ...)`` before the copy and not mentioned between
  the two; after the copy it is only a launch argument, a ``cudaMemcpy``/``cudaMemset`` operand,
  or freed by ``cudaFree``. A launch argument counts as a write when the kernel stores to (or
  updates atomically) that parameter in its IR; a parameter polypy splits into several (a
  ``T**``, a record of mixed members) counts as unknown and the copy stays.
* ``h`` is a local (not ``static``) pointer whose only definition is an allocation, ``malloc``,
  ``calloc`` or ``new T[n]``, before the copy: fresh memory, which nothing else points to. Its
  uses are element accesses ``h[i]`` of a scalar element type, or ``h[i].m`` of a struct whose
  members are all scalars (read by lvalue-to-rvalue conversion, or written by ``=``, a compound
  assignment, ``++``/``--``), null tests,
  ``memset``/``memcpy``/``memmove``/``fread``/``fwrite``/``cudaMemcpy`` operands (each position
  a read or a write), and ``free(h)``/``delete[] h``. Anything else -- ``&h[i]``, ``h + 1``,
  passing ``h`` to another function, binding ``h[i]`` to a reference -- could make an alias this
  module would not see, and keeps the copy.
* ``h`` is the source of no other host-to-device copy in ``F`` (two device arrays sharing one
  buffer would see each other's writes).
* ``h`` is freed, if at all, outside loops, after every use of ``d`` but its ``cudaFree``, and
  some ``cudaFree(d)`` follows the copy. Where the ``free(h)`` comes before that ``cudaFree``
  (Rodinia bfs frees its host arrays first), it becomes ``polypy_rt_shared_free(h)``: the memory
  is freed by the last of its owners (the ``cudaFree``, or a host pointer that took it), so
  that the runtime's table of allocations never names freed memory.
* Both pointers have the same element type, aligned to at most 16 bytes (what ``malloc``
  guarantees; ``cudaMalloc``'s 256 is not needed by any translated kernel).

The rewrite (``codegen.c.module``) calls ``polypy_rt_share_copy(&d, h, n)``, which still checks at
run time that ``d`` is a block ``cudaMalloc`` gave of exactly ``n`` bytes (otherwise it copies):
it gives the block back to the allocator's pool and points ``d`` at ``h``; ``cudaFree(d)`` then
frees nothing.

**To the host** (``_Take``): ``cudaMemcpy(o, d, n, cudaMemcpyDeviceToHost)`` into a fresh host
block, where nothing uses ``d`` after the copy but ``cudaFree``: ``o`` takes ``d``'s memory
(``polypy_rt_take_copy``) and its own untouched block is freed. ``o``'s ``malloc`` becomes
``polypy_rt_host_malloc``, which records the size (the run time takes only a block of exactly
the copy's size); where ``d`` is itself a host buffer ``h`` (shared above), ``h`` must be used by
nothing but ``free`` after the copy, and the ``free`` calls of both owners become
``polypy_rt_host_free``, the second of which frees the memory.

Emulated runs (``polypy run --emulate``), the reference for translated ones, and runs that check
device pointers (``--check-bounds``) make every copy.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import clang.cindex as ci

import polypy.ir.nodes as n
from polypy.ir.queries import buffers_written
from polypy.ir.visitor import walk_block

from frontend.function_scan import scan
from frontend.host_uses import (ALLOCATORS, CALLS, LOOPS, Refused, assignment_of, call_args, check_null_init,
                               check_release, check_site, check_types, copy_kind, device_use, element_access,
                               initializer_of, is_allocation, is_test, parent_of, spelled_in_file, stripped,
                               variable_of)
from frontend.host_round_trips import round_trips
from frontend.launch_shapes import HostFunction, var_key

CK = ci.CursorKind



@dataclasses.dataclass(frozen=True)
class CopyDecision:
    """One ``cudaMemcpy`` between a local device pointer and a local host pointer: not made
    (``shared``) or kept, and why. ``direction``: "to-device" or "to-host". ``renames``: calls
    whose function the rewrite replaces (a take's ``malloc`` and ``free`` calls, by the runtime's
    ``polypy_rt_host_malloc``/``polypy_rt_host_free``)."""

    call: ci.Cursor
    device: str
    host: str
    count: ci.Cursor
    shared: bool
    why: str
    direction: str = "to-device"
    renames: tuple[tuple[ci.Cursor, str], ...] = ()


def share_copies(functions: Sequence[ci.Cursor],
                 written: Callable[[ci.Cursor], Sequence[bool | None] | None]) -> list[CopyDecision]:
    """The decisions for every copy between a local device pointer and a local host pointer in
    ``functions`` (host function definitions, not templates): host-to-device copies first, then
    device-to-host ones, in the order of the text. ``written(launch)``: per argument of a
    launch, whether its kernel writes through it (None: not known), or None for a launch of
    unknown kernel."""
    out: list[CopyDecision] = []
    for fn in functions:
        if fn.kind != CK.FUNCTION_DECL and fn.kind != CK.CXX_METHOD:
            continue
        first = len(out)
        facts = None
        shared: dict[tuple, object] = {}  # device variable -> the host variable it became
        for direction in ("cudaMemcpyHostToDevice", "cudaMemcpyDeviceToHost"):
            for call in scan(fn).calls:  # (frontend.function_scan)
                if call.spelling != "cudaMemcpy" or copy_kind(call) != direction:
                    continue
                args = call_args(call)
                dst, src = variable_of(args[0]), variable_of(args[1])
                device, host = (dst, src) if direction == "cudaMemcpyHostToDevice" else (src, dst)
                if device is None:
                    continue
                if facts is None:
                    facts = HostFunction(fn)
                d = facts.vars.get(var_key(device))
                h = facts.vars.get(var_key(host)) if host is not None else None
                if d is None:
                    continue
                if direction == "cudaMemcpyHostToDevice":
                    if h is None:
                        out.append(CopyDecision(call, device.spelling, "", args[2], False,
                                                "the source is not a local pointer variable"))
                        continue
                    share = _Share(facts, written)
                    ok, why = share.decide(call, d, h)
                    if ok:
                        shared[var_key(device)] = h
                    out.append(CopyDecision(call, device.spelling, host.spelling, args[2], ok, why,
                                            renames=tuple(share.renames) if ok else ()))
                elif h is not None:
                    take = _Take(facts, call, d, h, shared.get(var_key(device)))
                    ok, why = take.decide()
                    out.append(CopyDecision(call, device.spelling, host.spelling, args[2], ok, why, "to-host",
                                            tuple(take.renames) if ok else ()))
        if facts is not None:
            out[first:] = _with_round_trips(fn, facts, out[first:])
    # A free of a shared buffer that a take renames too (the same polypy_rt_shared_free) is edited once.
    taken = {r.hash for c in out if c.direction == "to-host" for r, _ in c.renames}
    return [dataclasses.replace(c, renames=tuple((r, f) for r, f in c.renames if r.hash not in taken))
            if c.direction == "to-device" and c.renames else c for c in out]


def _with_round_trips(fn: ci.Cursor, facts: HostFunction, decisions: list[CopyDecision]) -> list[CopyDecision]:
    """``decisions`` (one function's) with the copies of its round trips in loops not made
    (``frontend.host_round_trips``), and the other copies in loops saying why they are none."""
    trips, refused = round_trips(fn, facts)
    first = {(t.first.extent.start.offset, t.first.extent.end.offset): t for t in trips}
    second = {(t.second.extent.start.offset, t.second.extent.end.offset): t for t in trips}
    out = []
    for c in decisions:
        key = (c.call.extent.start.offset, c.call.extent.end.offset)
        if key in first:
            c = dataclasses.replace(c, shared=True, why=first[key].why,
                                    renames=tuple((f, "polypy_rt_shared_free") for f in first[key].frees))
        elif key in second:
            c = dataclasses.replace(c, shared=True, why=second[key].why, direction="round-trip-out", renames=())
        elif key in refused:
            c = dataclasses.replace(c, why=f"{c.why}; not a round trip: {refused[key]}")
        out.append(c)
    return out


class _Share:
    """Whether a host-to-device copy need not be made: the conditions of the module docstring."""

    def __init__(self, facts: HostFunction, written: Callable[[ci.Cursor], Sequence[bool | None] | None]):
        self.facts = facts
        self.written = written
        self.renames: list[tuple[ci.Cursor, str]] = []  # frees of the buffer before the cudaFree

    def decide(self, call: ci.Cursor, d, h) -> tuple[bool, str]:
        """Whether the copy ``call`` from ``h`` to ``d`` need not be made, and why (not)."""
        try:
            return True, self.prove(call, d, h)
        except Refused as e:
            return False, str(e)

    def prove(self, call: ci.Cursor, d, h) -> str:
        check_site(self.facts, call, d)
        at = call.extent.end.offset
        check_types(d.decl, h.decl)
        d_written, last_d, d_freed = self.device_uses(call, d, at)
        h_read = self.host_uses(call, h, at, last_d, d_freed)
        if d_written is not None and h_read is not None:
            raise Refused(f"{d.decl.spelling} is written (line {d_written}) and the host reads {h.decl.spelling} "
                           f"after the copy (line {h_read})")
        return (f"{d.decl.spelling} is {h.decl.spelling} itself: " +
                (f"{d.decl.spelling} is written (line {d_written}), and the host neither reads nor writes "
                 f"{h.decl.spelling} after the copy" if d_written is not None else
                 f"nothing writes {d.decl.spelling} or {h.decl.spelling} after the copy"))

    # -- the device pointer
    def device_uses(self, copy: ci.Cursor, d, at: int) -> tuple[int | None, int, int | None]:
        """(line of the first write of ``d`` after the copy or None, offset of its last use,
        offset of its first cudaFree or None)."""
        name = d.decl.spelling
        check_null_init(d.decl)
        allocs = 0
        first_write: int | None = None
        last = at
        freed: int | None = None
        for r in d.refs:
            use = r.cursor.extent.start.offset
            line = r.cursor.location.line
            kind, parent, position = device_use(self.facts, r)
            if kind == "alloc" and use < copy.extent.start.offset:
                allocs += 1
                continue
            if kind in ("alloc", "address"):
                raise Refused(f"the address of {name} is taken (line {line})")
            if copy.extent.start.offset <= use < at:
                continue  # the copy itself
            if use < at:
                raise Refused(f"{name} is used before the copy otherwise than by its cudaMalloc (line {line})")
            if kind != "free":
                last = max(last, use)
            if kind == "launch":
                flags = self.written(parent)
                if flags is None or position >= len(flags) or flags[position] is None:
                    raise Refused(f"what the kernel launched at line {line} does with {name} is not known")
                if flags[position] and first_write is None:
                    first_write = line
                continue
            if kind == "free":
                freed = use if freed is None else freed
                continue
            if kind == "write":
                first_write = line if first_write is None else first_write
                continue
            if kind == "read":
                continue
            raise Refused(f"{name} is used otherwise after the copy (line {line})")
        if allocs != 1:
            raise Refused(f"{name} is not given memory by exactly one cudaMalloc before the copy")
        return first_write, last, freed

    # -- the host pointer
    def host_uses(self, copy: ci.Cursor, h, at: int, last_d: int, d_freed: int | None) -> int | None:
        """The line of the first read of ``h`` after the copy, or None; raises where ``h`` is
        written after the copy or used in a way not followed."""
        name = h.decl.spelling
        init = initializer_of(h.decl)
        definitions = [(h.decl.extent.start.offset, init)] if init is not None else []
        first_read: int | None = None
        copies = 0
        for r in h.refs:
            use = r.cursor.extent.start.offset
            line = r.cursor.location.line
            after = use >= at
            value = assignment_of(self.facts, r, name)
            if value is not None:
                definitions.append((use, value))
                continue
            level, parent, index = parent_of(r)
            kind = parent.kind if parent is not None else None
            if kind == CK.ARRAY_SUBSCRIPT_EXPR and index == 0:
                access = element_access(r, level, name)
                if access == "write" and after:
                    raise Refused(f"the host writes {name} after the copy (line {line})")
                if access == "read" and after and first_read is None:
                    first_read = line
                continue
            if kind == CK.CALL_EXPR and parent.spelling in CALLS:
                writes, reads = CALLS[parent.spelling]
                if parent.spelling == "cudaMemcpy" and index == 2 and copy_kind(parent) == "cudaMemcpyHostToDevice":
                    copies += 1
                    if parent.extent == copy.extent:
                        continue
                if index - 1 in writes:
                    if after:
                        raise Refused(f"the host writes {name} after the copy (line {line})")
                    continue
                if index - 1 in reads:
                    if after and first_read is None:
                        first_read = line
                    continue
            if (kind == CK.CALL_EXPR and parent.spelling == "free" and index == 1) or kind == CK.CXX_DELETE_EXPR:
                if after and check_release(r, name, last_d, d_freed):
                    if kind != CK.CALL_EXPR or not spelled_in_file(parent, "free"):
                        raise Refused(f"{name} is released before the device array that became it (line {line}) "
                                      "otherwise than by a free spelled in the file")
                    self.renames.append((parent, "polypy_rt_shared_free"))
                continue
            if is_test(r, level):
                continue
            raise Refused(f"{name} is used otherwise (line {line}): it could be reached through another pointer")
        if copies != 1:
            raise Refused(f"{name} is copied to the device more than once")
        if len(definitions) != 1 or definitions[0][0] >= at or not is_allocation(definitions[0][1]):
            raise Refused(f"{name} is not fresh memory from one malloc, calloc or new[] before the copy")
        return first_read


class _Take:
    """Whether the device-to-host copy ``call`` from ``d`` into ``o`` need not be made: ``o``
    then points at ``d``'s memory (``polypy_rt_take_copy``). ``source``: the host variable ``d``
    became by a shared host-to-device copy, or None.

    * ``o`` is a local pointer whose only definition, before the copy, is ``malloc`` or
      ``calloc`` (the rewrite records its size: the run time takes only a block of exactly the
      copy's size), and which nothing but null tests uses between that definition and the copy:
      its memory is untouched, and nothing else points to it. After the copy, ``o``'s uses are
      those ``_Share`` follows for a host buffer, writes included, and ``free(o)``.
    * ``d`` is used only by its ``cudaMalloc``, launches, copies and fills before the copy, and
      by nothing but ``cudaFree`` after it: its memory is ``o``'s from then on.
    * Where ``d`` is ``source``'s memory, ``source`` is used by nothing but ``free`` after the
      copy. That memory then has two owners: both ``free`` calls become
      ``polypy_rt_host_free``, which frees it at the second.
    """

    def __init__(self, facts: HostFunction, call: ci.Cursor, d, o, source):
        self.facts = facts
        self.call = call
        self.d, self.o, self.source = d, o, source
        self.renames: list[tuple[ci.Cursor, str]] = []

    def decide(self) -> tuple[bool, str]:
        try:
            self.prove()
        except Refused as e:
            return False, str(e)
        o, d = self.o.decl.spelling, self.d.decl.spelling
        why = f"{o} takes {d}'s memory: after the copy, nothing uses {d} but cudaFree"
        if self.source is not None:
            why += f", nor {self.source.decl.spelling} (the host buffer {d} is) but free"
        return True, why

    def prove(self) -> None:
        check_site(self.facts, self.call, self.o)
        check_types(self.d.decl, self.o.decl)
        self.device()
        self.host()
        if self.source is not None:
            self.buffer()

    def device(self) -> None:
        name = self.d.decl.spelling
        start, end = self.call.extent.start.offset, self.call.extent.end.offset
        check_null_init(self.d.decl)
        for r in self.d.refs:
            use = r.cursor.extent.start.offset
            line = r.cursor.location.line
            if start <= use < end:
                continue
            kind, _, _ = device_use(self.facts, r)
            if kind == "free":
                continue
            if use >= end:
                raise Refused(f"{name} is used after the copy (line {line})")
            if kind == "address":
                raise Refused(f"the address of {name} is taken (line {line})")
            if kind == "other":
                raise Refused(f"{name} is used otherwise (line {line})")

    def host(self) -> None:
        name = self.o.decl.spelling
        start, end = self.call.extent.start.offset, self.call.extent.end.offset
        init = initializer_of(self.o.decl)
        definitions = [(self.o.decl.extent.start.offset, init)] if init is not None else []
        for r in self.o.refs:
            use = r.cursor.extent.start.offset
            line = r.cursor.location.line
            if start <= use < end:
                continue
            value = assignment_of(self.facts, r, name)
            if value is not None:
                definitions.append((use, value))
                continue
            level, parent, index = parent_of(r)
            if is_test(r, level):
                continue
            if use < start:
                raise Refused(f"{name} is used before the copy (line {line}): its memory may not be fresh")
            kind = parent.kind if parent is not None else None
            if kind == CK.ARRAY_SUBSCRIPT_EXPR and index == 0:
                element_access(r, level, name)
                continue
            if kind == CK.CALL_EXPR and parent.spelling in CALLS and index >= 1:
                continue
            if kind == CK.CALL_EXPR and parent.spelling == "free" and index == 1:
                self.release(r, parent, name)
                continue
            raise Refused(f"{name} is used otherwise (line {line}): it could be reached through another pointer")
        if len(definitions) != 1 or definitions[0][0] >= start:
            raise Refused(f"{name} is not defined once before the copy")
        alloc = stripped(definitions[0][1])
        if alloc.kind != CK.CALL_EXPR or alloc.spelling not in ALLOCATORS or \
                not spelled_in_file(alloc, alloc.spelling):
            raise Refused(f"{name} is not fresh memory from one malloc or calloc")
        self.renames.append((alloc, f"polypy_rt_host_{alloc.spelling}"))

    def buffer(self) -> None:
        """``d`` is ``source``'s memory: after the copy, ``source`` is only freed."""
        name = self.source.decl.spelling
        for r in self.source.refs:
            if r.cursor.extent.start.offset < self.call.extent.end.offset:
                continue
            _, parent, index = parent_of(r)
            if parent is not None and parent.kind == CK.CALL_EXPR and parent.spelling == "free" and index == 1:
                # it may come before d's cudaFree (_Share): polypy_rt_shared_free is polypy_rt_host_free
                # where the allocation table no longer names the memory
                self.release(r, parent, name, "polypy_rt_shared_free")
                continue
            raise Refused(f"{name}, the host buffer {self.d.decl.spelling} is, is used after the copy "
                           f"(line {r.cursor.location.line})")

    def release(self, r, call: ci.Cursor, name: str, function: str = "polypy_rt_host_free") -> None:
        if any(anc.kind in LOOPS for anc, _ in r.ancestors):
            raise Refused(f"{name} is freed inside a loop (line {r.cursor.location.line})")
        if not spelled_in_file(call, "free"):
            raise Refused(f"{name} is freed by a macro (line {r.cursor.location.line})")
        self.renames.append((call, function))


def written_arguments(kernel: n.Kernel) -> tuple[bool | None, ...]:
    """Per parameter of the C signature of ``kernel`` (GPU form), whether it stores through it
    (atomics included): None for parameters polypy splits into several."""
    stored = buffers_written(kernel.body)
    # What a kernel hands to a kernel it launches from device code may be written by that child
    # (n.Launch), within this launch as the host sees it.
    stored |= {p for x in walk_block(kernel.body) if isinstance(x, n.Launch) for p in x.pointers if p is not None}
    out: list[bool | None] = []
    for sp in kernel.source_params:
        if len(sp.members) != 1 or sp.members[0][0] != "":
            out.append(None)
            continue
        out.append(sp.members[0][1] in stored)
    return tuple(out)

