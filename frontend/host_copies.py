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
  uses are element accesses ``h[i]`` of a scalar element type (read by lvalue-to-rvalue
  conversion, or written by ``=``, a compound assignment, ``++``/``--``), null tests,
  ``memset``/``memcpy``/``memmove``/``fread``/``fwrite``/``cudaMemcpy`` operands (each position
  a read or a write), and ``free(h)``/``delete[] h``. Anything else -- ``&h[i]``, ``h + 1``,
  passing ``h`` to another function, binding ``h[i]`` to a reference -- could make an alias this
  module would not see, and keeps the copy.
* ``h`` is the source of no other host-to-device copy in ``F`` (two device arrays sharing one
  buffer would see each other's writes).
* ``h`` is freed, if at all, outside loops, after a ``cudaFree(d)`` and after every use of ``d``.
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

from frontend.clang_setup import binary_operator, evaluate, preorder, unary_operator
from frontend.launch_shapes import HostFunction, Pos, var_key

CK = ci.CursorKind

# Writes and reads each libc/runtime call makes through a pointer argument, by argument position.
_CALLS: dict[str, tuple[frozenset[int], frozenset[int]]] = {
    "memset": (frozenset({0}), frozenset()),
    "memcpy": (frozenset({0}), frozenset({1})),
    "memmove": (frozenset({0}), frozenset({1})),
    "fread": (frozenset({0}), frozenset()),
    "fwrite": (frozenset(), frozenset({0})),
    "cudaMemcpy": (frozenset({0}), frozenset({1})),
    "cudaMemset": (frozenset({0}), frozenset()),
}
_ALLOCATORS = ("malloc", "calloc")  # a take rewrites these two: no new[] there
_LOOPS = (CK.FOR_STMT, CK.WHILE_STMT, CK.DO_STMT, CK.CXX_FOR_RANGE_STMT)
_CASTS = (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR, CK.CSTYLE_CAST_EXPR, CK.CXX_STATIC_CAST_EXPR,
          CK.CXX_REINTERPRET_CAST_EXPR, CK.CXX_CONST_CAST_EXPR, CK.CXX_FUNCTIONAL_CAST_EXPR)
_SCALARS = frozenset({
    ci.TypeKind.BOOL, ci.TypeKind.CHAR_U, ci.TypeKind.UCHAR, ci.TypeKind.CHAR_S, ci.TypeKind.SCHAR,
    ci.TypeKind.SHORT, ci.TypeKind.USHORT, ci.TypeKind.INT, ci.TypeKind.UINT, ci.TypeKind.LONG,
    ci.TypeKind.ULONG, ci.TypeKind.LONGLONG, ci.TypeKind.ULONGLONG, ci.TypeKind.FLOAT, ci.TypeKind.DOUBLE,
})
MAX_ALIGN = 16  # bytes malloc and new[] align every block to (x86-64, AArch64)


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
        facts = None
        shared: dict[tuple, object] = {}  # device variable -> the host variable it became
        for direction in ("cudaMemcpyHostToDevice", "cudaMemcpyDeviceToHost"):
            for call in preorder(fn):
                if call.kind != CK.CALL_EXPR or call.spelling != "cudaMemcpy" or _copy_kind(call) != direction:
                    continue
                args = _args(call)
                dst, src = _variable(args[0]), _variable(args[1])
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
                    ok, why = _Share(facts, written).decide(call, d, h)
                    if ok:
                        shared[var_key(device)] = h
                    out.append(CopyDecision(call, device.spelling, host.spelling, args[2], ok, why))
                elif h is not None:
                    take = _Take(facts, call, d, h, shared.get(var_key(device)))
                    ok, why = take.decide()
                    out.append(CopyDecision(call, device.spelling, host.spelling, args[2], ok, why, "to-host",
                                            tuple(take.renames) if ok else ()))
    return out


class _Refused(Exception):
    pass


class _Share:
    """Whether a host-to-device copy need not be made: the conditions of the module docstring."""

    def __init__(self, facts: HostFunction, written: Callable[[ci.Cursor], Sequence[bool | None] | None]):
        self.facts = facts
        self.written = written

    def decide(self, call: ci.Cursor, d, h) -> tuple[bool, str]:
        """Whether the copy ``call`` from ``h`` to ``d`` need not be made, and why (not)."""
        try:
            return True, self.prove(call, d, h)
        except _Refused as e:
            return False, str(e)

    def prove(self, call: ci.Cursor, d, h) -> str:
        _check_site(self.facts, call, d)
        at = call.extent.end.offset
        _check_types(d.decl, h.decl)
        d_written, last_d, d_freed = self.device_uses(call, d, at)
        h_read = self.host_uses(call, h, at, last_d, d_freed)
        if d_written is not None and h_read is not None:
            raise _Refused(f"{d.decl.spelling} is written (line {d_written}) and the host reads {h.decl.spelling} "
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
        _check_null_init(d.decl)
        allocs = 0
        first_write: int | None = None
        last = at
        freed: int | None = None
        for r in d.refs:
            use = r.cursor.extent.start.offset
            line = r.cursor.location.line
            kind, parent, position = _device_use(self.facts, r)
            if kind == "alloc" and use < copy.extent.start.offset:
                allocs += 1
                continue
            if kind in ("alloc", "address"):
                raise _Refused(f"the address of {name} is taken (line {line})")
            if copy.extent.start.offset <= use < at:
                continue  # the copy itself
            if use < at:
                raise _Refused(f"{name} is used before the copy otherwise than by its cudaMalloc (line {line})")
            last = max(last, use)
            if kind == "launch":
                flags = self.written(parent)
                if flags is None or position >= len(flags) or flags[position] is None:
                    raise _Refused(f"what the kernel launched at line {line} does with {name} is not known")
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
            raise _Refused(f"{name} is used otherwise after the copy (line {line})")
        if allocs != 1:
            raise _Refused(f"{name} is not given memory by exactly one cudaMalloc before the copy")
        return first_write, last, freed

    # -- the host pointer
    def host_uses(self, copy: ci.Cursor, h, at: int, last_d: int, d_freed: int | None) -> int | None:
        """The line of the first read of ``h`` after the copy, or None; raises where ``h`` is
        written after the copy or used in a way not followed."""
        name = h.decl.spelling
        init = _initializer(h.decl)
        definitions = [(h.decl.extent.start.offset, init)] if init is not None else []
        first_read: int | None = None
        copies = 0
        for r in h.refs:
            use = r.cursor.extent.start.offset
            line = r.cursor.location.line
            after = use >= at
            value = _assigned(self.facts, r, name)
            if value is not None:
                definitions.append((use, value))
                continue
            level, parent, index = _parent(r)
            kind = parent.kind if parent is not None else None
            if kind == CK.ARRAY_SUBSCRIPT_EXPR and index == 0:
                access = _element_access(r, level, name)
                if access == "write" and after:
                    raise _Refused(f"the host writes {name} after the copy (line {line})")
                if access == "read" and after and first_read is None:
                    first_read = line
                continue
            if kind == CK.CALL_EXPR and parent.spelling in _CALLS:
                writes, reads = _CALLS[parent.spelling]
                if parent.spelling == "cudaMemcpy" and index == 2 and _copy_kind(parent) == "cudaMemcpyHostToDevice":
                    copies += 1
                    if parent.extent == copy.extent:
                        continue
                if index - 1 in writes:
                    if after:
                        raise _Refused(f"the host writes {name} after the copy (line {line})")
                    continue
                if index - 1 in reads:
                    if after and first_read is None:
                        first_read = line
                    continue
            if (kind == CK.CALL_EXPR and parent.spelling == "free" and index == 1) or kind == CK.CXX_DELETE_EXPR:
                if after:
                    _check_release(r, name, last_d, d_freed)
                continue
            if _is_test(r, level):
                continue
            raise _Refused(f"{name} is used otherwise (line {line}): it could be reached through another pointer")
        if copies != 1:
            raise _Refused(f"{name} is copied to the device more than once")
        if len(definitions) != 1 or definitions[0][0] >= at or not _is_allocation(definitions[0][1]):
            raise _Refused(f"{name} is not fresh memory from one malloc, calloc or new[] before the copy")
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
        except _Refused as e:
            return False, str(e)
        o, d = self.o.decl.spelling, self.d.decl.spelling
        why = f"{o} takes {d}'s memory: after the copy, nothing uses {d} but cudaFree"
        if self.source is not None:
            why += f", nor {self.source.decl.spelling} (the host buffer {d} is) but free"
        return True, why

    def prove(self) -> None:
        _check_site(self.facts, self.call, self.o)
        _check_types(self.d.decl, self.o.decl)
        self.device()
        self.host()
        if self.source is not None:
            self.buffer()

    def device(self) -> None:
        name = self.d.decl.spelling
        start, end = self.call.extent.start.offset, self.call.extent.end.offset
        _check_null_init(self.d.decl)
        for r in self.d.refs:
            use = r.cursor.extent.start.offset
            line = r.cursor.location.line
            if start <= use < end:
                continue
            kind, _, _ = _device_use(self.facts, r)
            if kind == "free":
                continue
            if use >= end:
                raise _Refused(f"{name} is used after the copy (line {line})")
            if kind == "address":
                raise _Refused(f"the address of {name} is taken (line {line})")
            if kind == "other":
                raise _Refused(f"{name} is used otherwise (line {line})")

    def host(self) -> None:
        name = self.o.decl.spelling
        start, end = self.call.extent.start.offset, self.call.extent.end.offset
        init = _initializer(self.o.decl)
        definitions = [(self.o.decl.extent.start.offset, init)] if init is not None else []
        for r in self.o.refs:
            use = r.cursor.extent.start.offset
            line = r.cursor.location.line
            if start <= use < end:
                continue
            value = _assigned(self.facts, r, name)
            if value is not None:
                definitions.append((use, value))
                continue
            level, parent, index = _parent(r)
            if _is_test(r, level):
                continue
            if use < start:
                raise _Refused(f"{name} is used before the copy (line {line}): its memory may not be fresh")
            kind = parent.kind if parent is not None else None
            if kind == CK.ARRAY_SUBSCRIPT_EXPR and index == 0:
                _element_access(r, level, name)
                continue
            if kind == CK.CALL_EXPR and parent.spelling in _CALLS and index >= 1:
                continue
            if kind == CK.CALL_EXPR and parent.spelling == "free" and index == 1:
                self.release(r, parent, name)
                continue
            raise _Refused(f"{name} is used otherwise (line {line}): it could be reached through another pointer")
        if len(definitions) != 1 or definitions[0][0] >= start:
            raise _Refused(f"{name} is not defined once before the copy")
        alloc = _strip(definitions[0][1])
        if alloc.kind != CK.CALL_EXPR or alloc.spelling not in _ALLOCATORS or \
                not _spelled(alloc, alloc.spelling):
            raise _Refused(f"{name} is not fresh memory from one malloc or calloc")
        self.renames.append((alloc, f"polypy_rt_host_{alloc.spelling}"))

    def buffer(self) -> None:
        """``d`` is ``source``'s memory: after the copy, ``source`` is only freed."""
        name = self.source.decl.spelling
        for r in self.source.refs:
            if r.cursor.extent.start.offset < self.call.extent.end.offset:
                continue
            _, parent, index = _parent(r)
            if parent is not None and parent.kind == CK.CALL_EXPR and parent.spelling == "free" and index == 1:
                self.release(r, parent, name)
                continue
            raise _Refused(f"{name}, the host buffer {self.d.decl.spelling} is, is used after the copy "
                           f"(line {r.cursor.location.line})")

    def release(self, r, call: ci.Cursor, name: str) -> None:
        if any(anc.kind in _LOOPS for anc, _ in r.ancestors):
            raise _Refused(f"{name} is freed inside a loop (line {r.cursor.location.line})")
        if not _spelled(call, "free"):
            raise _Refused(f"{name} is freed by a macro (line {r.cursor.location.line})")
        self.renames.append((call, "polypy_rt_host_free"))


def _device_use(facts: HostFunction, r) -> tuple[str, ci.Cursor | None, int]:
    """What the reference ``r`` to a device pointer does: "alloc" (``&d`` given to
    ``cudaMalloc``), "address" (``&d`` otherwise), "launch" (an argument of a launch, with its
    position), "free" (``cudaFree``), "write" or "read" (a ``cudaMemcpy``/``cudaMemset``
    operand), or "other"; with the call it is in."""
    level, parent, index = _parent(r)
    if parent is not None and parent.kind == CK.UNARY_OPERATOR and unary_operator(parent) == "&":
        _, call, i = _parent(r, level)
        alloc = call is not None and call.kind == CK.CALL_EXPR and call.spelling == "cudaMalloc" and i == 1
        return ("alloc" if alloc else "address"), call, -1
    if parent is None or parent.kind != CK.CALL_EXPR:
        return "other", parent, -1
    if (parent.extent.start.offset, parent.extent.end.offset) in facts.launches:
        return ("launch" if index >= 2 else "other"), parent, index - 2
    if parent.spelling == "cudaFree" and index == 1:
        return "free", parent, -1
    if parent.spelling in ("cudaMemcpy", "cudaMemset"):
        writes, reads = _CALLS[parent.spelling]
        if index - 1 in writes:
            return "write", parent, -1
        if index - 1 in reads:
            return "read", parent, -1
    return "other", parent, -1


def _check_site(facts: HostFunction, call: ci.Cursor, var) -> None:
    """The copy ``call`` (which names ``var``) runs once per run of its function, where written:
    no ``goto`` in the function, no loop, ``switch`` or lambda around it, no macro making it."""
    if facts.has_goto:
        raise _Refused("the function uses goto")
    start, end = call.extent.start.offset, call.extent.end.offset
    inside = [r for r in var.refs if start <= r.cursor.extent.start.offset < end]
    if not inside:
        raise _Refused("the copy was not found in its function")
    if any(anc.kind in _LOOPS or anc.kind in (CK.SWITCH_STMT, CK.LAMBDA_EXPR) for anc, _ in inside[0].ancestors):
        raise _Refused("the copy is inside a loop, switch or lambda")
    if call.extent.start.file is None or call.location.file is None or \
            call.extent.start.file.name != call.location.file.name or \
            not _spelled(call, "cudaMemcpy"):
        raise _Refused("the copy is written by a macro")


def _spelled(call: ci.Cursor, name: str) -> bool:
    """Whether the call's text starts with ``name`` itself (no macro makes it)."""
    return [t.spelling for t in call.get_tokens()][:1] == [name]


def _check_null_init(decl: ci.Cursor) -> None:
    init = _initializer(decl)
    if init is not None and not _is_null(init):
        raise _Refused(f"{decl.spelling} is initialized")


def _assigned(facts: HostFunction, r, name: str) -> ci.Cursor | None:
    """The value assigned where the reference ``r`` is the left side of a statement ``v = e;``
    (None where it is not); an assignment inside an expression is refused."""
    raw, raw_pos = r.ancestors[-1]
    if not (raw.kind == CK.BINARY_OPERATOR and binary_operator(raw) == "=" and facts.index[r.pos] == 0):
        return None
    if facts.kind_above(raw_pos) != CK.COMPOUND_STMT:
        raise _Refused(f"{name} is assigned inside an expression (line {r.cursor.location.line})")
    return list(raw.get_children())[-1]


def _check_types(d: ci.Cursor, h: ci.Cursor) -> None:
    for v in (d, h):
        if v.storage_class == ci.StorageClass.STATIC:
            raise _Refused(f"{v.spelling} is static")
        if v.type.get_canonical().kind != ci.TypeKind.POINTER:
            raise _Refused(f"{v.spelling} is not a pointer")
    de, he = (v.type.get_canonical().get_pointee() for v in (d, h))
    if de.get_canonical().spelling.replace("const ", "") != he.get_canonical().spelling.replace("const ", ""):
        raise _Refused(f"{d.spelling} and {h.spelling} have different element types")
    if not 0 < de.get_align() <= MAX_ALIGN:
        raise _Refused(f"the elements of {d.spelling} need more alignment than malloc gives")


def _element_access(r, level: int, name: str) -> str:
    """"read", "write" or "none" (``sizeof``) for the element access ``h[i]`` at
    ``r.ancestors[level]``."""
    sub = r.ancestors[level][0]
    line = r.cursor.location.line
    if sub.type.get_canonical().kind not in _SCALARS:
        raise _Refused(f"the elements of {name} are not scalars (line {line})")
    i = level - 1
    while i >= 0 and r.ancestors[i][0].kind == CK.PAREN_EXPR:
        i -= 1
    if i < 0:
        raise _Refused(f"{name}[...] is used otherwise (line {line})")
    parent = r.ancestors[i][0]
    index = r.facts.index[_node(r, i + 1)[1]]
    if parent.kind == CK.UNEXPOSED_EXPR:  # lvalue-to-rvalue: a read, unless kept an lvalue (const T&)
        if parent.type.is_const_qualified():
            raise _Refused(f"{name}[...] is bound to a reference (line {line})")
        return "read"
    op = binary_operator(parent) if parent.kind in (CK.BINARY_OPERATOR, CK.COMPOUND_ASSIGNMENT_OPERATOR) else ""
    if index == 0 and (op == "=" or parent.kind == CK.COMPOUND_ASSIGNMENT_OPERATOR):
        return "write"
    if parent.kind == CK.UNARY_OPERATOR and unary_operator(parent) in ("++", "--"):
        return "write"
    if parent.kind == CK.CXX_UNARY_EXPR:  # sizeof h[0]: not evaluated
        return "none"
    raise _Refused(f"{name}[...] is used otherwise (line {line}): it could be reached through another pointer")


def _check_release(r, name: str, last_d: int, d_freed: int | None) -> None:
    line = r.cursor.location.line
    if any(anc.kind in _LOOPS for anc, _ in r.ancestors):
        raise _Refused(f"{name} is freed inside a loop (line {line})")
    use = r.cursor.extent.start.offset
    if d_freed is None or d_freed > use or last_d > use:
        raise _Refused(f"{name} is freed before the device array that became it (line {line})")


def _node(r, level: int) -> tuple[ci.Cursor, Pos]:
    """The cursor at ``level`` of a reference's ancestors; ``len(ancestors)``: the reference."""
    return (r.cursor, r.pos) if level == len(r.ancestors) else r.ancestors[level]


def _parent(r, level: int | None = None) -> tuple[int, ci.Cursor | None, int]:
    """From ``level`` of a reference's ancestors (default: the reference itself) up through
    parentheses and casts to pointer types: (the level of the first other ancestor, that
    ancestor, the index among its children of the child leading down), or (-1, None, -1)."""
    level = len(r.ancestors) if level is None else level
    j = level - 1
    while j >= 0 and _transparent(r.ancestors[j][0]):
        j -= 1
    if j < 0:
        return -1, None, -1
    return j, r.ancestors[j][0], r.facts.index[_node(r, j + 1)[1]]


def _transparent(c: ci.Cursor) -> bool:
    return c.kind == CK.PAREN_EXPR or (c.kind in _CASTS and c.type.get_canonical().kind == ci.TypeKind.POINTER)


def _initializer(decl: ci.Cursor) -> ci.Cursor | None:
    init = [ch for ch in decl.get_children() if ch.kind not in (CK.TYPE_REF, CK.NAMESPACE_REF, CK.TEMPLATE_REF)]
    return init[-1] if init else None


def _args(call: ci.Cursor) -> list[ci.Cursor]:
    return list(call.get_children())[1:]


def _copy_kind(call: ci.Cursor) -> str:
    args = _args(call)
    if len(args) < 4:
        return ""
    k = _strip(args[3])
    return k.spelling if k.kind == CK.DECL_REF_EXPR else ""


def _strip(e: ci.Cursor) -> ci.Cursor:
    while e.kind in _CASTS:
        children = [ch for ch in e.get_children() if ch.kind not in (CK.TYPE_REF, CK.NAMESPACE_REF)]
        if len(children) != 1:
            return e
        e = children[0]
    return e


def _variable(e: ci.Cursor) -> ci.Cursor | None:
    """The local variable ``e`` names, through casts; None for any other expression."""
    e = _strip(e)
    if e.kind == CK.DECL_REF_EXPR and e.referenced is not None and e.referenced.kind == CK.VAR_DECL:
        return e.referenced
    return None


def _is_null(e: ci.Cursor) -> bool:
    e = _strip(e)
    if e.kind in (CK.CXX_NULL_PTR_LITERAL_EXPR, CK.GNU_NULL_EXPR):
        return True
    return e.kind == CK.INTEGER_LITERAL and evaluate(e) == 0


def _is_allocation(e: ci.Cursor) -> bool:
    e = _strip(e)
    if e.kind == CK.CXX_NEW_EXPR:
        return True
    return e.kind == CK.CALL_EXPR and e.spelling in _ALLOCATORS


def _is_test(r, level: int) -> bool:
    """A null test of the pointer at ``level`` of a reference's ancestors: ``!h``, ``h == NULL``,
    ``if (h)``, ``h && ...`` (through the conversion to ``bool``)."""
    while level >= 0 and r.ancestors[level][0].kind == CK.UNEXPOSED_EXPR and \
            r.ancestors[level][0].type.get_canonical().kind == ci.TypeKind.BOOL:
        level -= 1
    if level < 0:
        return False
    parent = r.ancestors[level][0]
    index = r.facts.index[_node(r, level + 1)[1]]
    if parent.kind == CK.UNARY_OPERATOR:
        return unary_operator(parent) == "!"
    if parent.kind == CK.BINARY_OPERATOR:
        return binary_operator(parent) in ("==", "!=", "&&", "||")
    return parent.kind in (CK.IF_STMT, CK.WHILE_STMT, CK.CONDITIONAL_OPERATOR) and index == 0


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

