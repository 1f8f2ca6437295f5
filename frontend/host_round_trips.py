"""Round trips a CPU need not make: a loop that copies a host buffer to the device, runs kernels
on the device array, and copies it back, every turn.

Rodinia srad_v2 does, in each of its iterations, ``cudaMemcpy(J_cuda, J, n, H2D)``, two launches
on ``J_cuda``, ``cudaMemcpy(J, J_cuda, n, D2H)``, and reads ``J`` on the host between the turns:
40 copies of 4 MiB for 20 iterations, which its OpenMP port does not make. On the CPU one array
can serve as both, where the program cannot tell:

* the device array's value is only ever seen between the two copies (it is written whole by the
  first and read whole by the second, and used nowhere else but by its ``cudaMalloc`` before the
  loop and its ``cudaFree`` after it), and
* between the two copies, the host's value of the buffer is seen by nothing: no host code runs
  there but launches whose arguments read no memory and calls that only wait.

Then at the first copy of each turn the two arrays hold the same values (so no copy is needed), and
at the second copy too (the host's buffer, untouched in between, would get exactly the device
array's values). What this module proves, in one host function ``F``, for a copy ``C1 =
cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)``:

* ``F`` has no ``goto``; ``C1`` is a statement of a loop's body itself (not inside an ``if``
  or another statement of that body), not inside a ``switch`` or lambda, spelled in the file;
  a later statement of the same body is ``C2 = cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost)``,
  with the same tokens for ``n`` (an expression that calls nothing);
* every statement between ``C1`` and ``C2`` is a launch whose configuration and arguments read
  no memory (no subscript, ``*``, ``->`` or call but ``dim3``'s constructors), or
  ``cudaDeviceSynchronize``, ``cudaThreadSynchronize``, ``cudaGetLastError``,
  ``cudaPeekAtLastError`` (no ``break``, ``continue`` or ``return`` can skip ``C2``);
* ``d`` is a local pointer declared before the loop, without initializer or with a null one,
  given memory by exactly one ``cudaMalloc(&d, ...)`` before the loop; its other uses are
  launch arguments between ``C1`` and ``C2`` and ``cudaFree(d)`` after the loop;
* ``h`` is a local pointer, not ``static``, with the same element type as ``d``, whose one
  definition, before the loop, is ``malloc``, ``calloc`` or ``new T[n]`` (fresh memory, which
  nothing else points to), and nothing between ``C1`` and ``C2`` names it. Its other
  uses are element accesses (``h[i]``, ``h[i].m`` of a struct of scalars), null tests, and
  operands of the C library's ``memset``/``memcpy``/``memmove``/``fread``/``fwrite``: the
  runtime's table of device memory holds ``h``'s bytes from the first turn on, and a CUDA call
  given ``h`` (or a function that could make one) would be checked against it. A ``free(h)`` in
  the loop is refused; one after the loop but before ``cudaFree(d)`` becomes
  ``polypy_rt_shared_free`` (see ``frontend/host_copies.py``).

The rewrite: ``C1`` becomes
``polypy_rt_share_copy`` (the first turn points ``d`` at ``h`` where ``d`` is a block
``cudaMalloc`` gave of exactly ``n`` bytes, otherwise copies; later turns find ``d == h``), ``C2``
becomes ``polypy_rt_same_copy`` (nothing to do where ``d == h``, otherwise the copy).
"""
from __future__ import annotations

import clang.cindex as ci

from frontend.clang_setup import binary_operator, evaluate, unary_operator
from frontend.function_scan import scan
from frontend.host_uses import (CALLS, LOOPS, Refused, assignment_of, call_args, check_null_init, check_types,
                               copy_kind, device_use, element_access, initializer_of, is_allocation, is_test, parent_of,
                               spelled_in_file, variable_of)
from frontend.launch_shapes import HostFunction, var_key

CK = ci.CursorKind

WAITS = frozenset({"cudaDeviceSynchronize", "cudaThreadSynchronize", "cudaGetLastError", "cudaPeekAtLastError"})


class RoundTrip:
    """A proved round trip: ``first`` (to the device) and ``second`` (back), the free calls of
    ``h`` to rename, and why."""

    def __init__(self, first: ci.Cursor, second: ci.Cursor, frees: list[ci.Cursor], why: str):
        self.first, self.second, self.frees, self.why = first, second, frees, why


def round_trips(fn: ci.Cursor, facts: HostFunction) -> tuple[list[RoundTrip], dict[tuple, str]]:
    """The round trips of ``fn``, and for each copy to the device inside a loop that is not one
    (by its call's offsets), why."""
    found: list[RoundTrip] = []
    refused: dict[tuple, str] = {}
    for call in scan(fn).calls:
        if call.spelling != "cudaMemcpy" or copy_kind(call) != "cudaMemcpyHostToDevice":
            continue
        args = call_args(call)
        device, host = variable_of(args[0]), variable_of(args[1])
        d = facts.vars.get(var_key(device)) if device is not None else None
        h = facts.vars.get(var_key(host)) if host is not None else None
        if d is None or h is None:
            continue
        key = (call.extent.start.offset, call.extent.end.offset)
        try:
            found.append(_prove(facts, call, d, h))
        except _NotALoopCopy:
            continue
        except Refused as e:
            refused[key] = str(e)
    return found, refused


class _NotALoopCopy(Exception):
    """The copy is not a statement of a loop's body: host_copies decides it."""


def _position(facts: HostFunction, call: ci.Cursor, var) -> int:
    """The position of ``call`` (a call naming ``var``) in ``facts``."""
    start, end = call.extent.start.offset, call.extent.end.offset
    for r in var.refs:
        if start <= r.cursor.extent.start.offset < end:
            for p in facts.above(r.pos):
                c = facts.cursors[p]
                if facts.kinds[p] == CK.CALL_EXPR and (c.extent.start.offset, c.extent.end.offset) == (start, end):
                    return p
    raise Refused("the copy was not found in its function")


def _prove(facts: HostFunction, c1: ci.Cursor, d, h) -> RoundTrip:
    p1 = _position(facts, c1, d)
    body = facts.parent[p1]
    loop = facts.parent[body] if body >= 0 else -1
    if body < 0 or facts.kinds[body] != CK.COMPOUND_STMT or loop < 0 or facts.kinds[loop] not in LOOPS:
        raise _NotALoopCopy()
    if facts.has_goto:
        raise Refused("the function uses goto")
    if any(facts.kinds[p] in (CK.SWITCH_STMT, CK.LAMBDA_EXPR) for p in facts.above(p1)):
        raise Refused("the copy is inside a switch or lambda")
    if not spelled_in_file(c1, "cudaMemcpy"):
        raise Refused("the copy is written by a macro")
    dn, hn = d.decl.spelling, h.decl.spelling
    statements = [p for p in range(body + 1, len(facts.kinds)) if facts.parent[p] == body]
    after = statements[statements.index(p1) + 1:]
    p2 = next((p for p in after if _copies_back(facts.cursors[p], d, h)), None)
    if p2 is None:
        raise Refused(f"the loop's body does not copy {dn} back into {hn} after the copy")
    c2 = facts.cursors[p2]
    count1, count2 = call_args(c1)[2], call_args(c2)[2]
    if _signature(count1) != _signature(count2) or any(c.kind == CK.CALL_EXPR for c in count1.walk_preorder()):
        raise Refused("the two copies' sizes are not the same expression without calls")
    if not spelled_in_file(c2, "cudaMemcpy"):
        raise Refused("the copy back is written by a macro")
    for p in after[:after.index(p2)]:
        _check_between(facts, facts.cursors[p])
    lo, hi = facts.cursors[loop].extent.start.offset, facts.cursors[loop].extent.end.offset
    window = (c1.extent.end.offset, c2.extent.start.offset)
    check_types(d.decl, h.decl)
    first_free = _device_uses(facts, d, (c1, c2), (lo, hi), window)
    frees = _host_uses(facts, h, (c1, c2), (lo, hi), window, first_free)
    line = facts.cursors[loop].location.line
    return RoundTrip(c1, c2, frees, f"{dn} is {hn} itself: a round trip in the loop at line {line} (the device "
                                    f"array is used only between the copies, and the host's values of {hn} "
                                    f"are not seen there)")


def _signature(e: ci.Cursor) -> list[tuple]:
    """An expression's tree: kinds, types, operators, the variables named and constant values
    (tokens are no use where a macro wrote it: the extent starts at the macro's definition)."""
    out = []
    for x in e.walk_preorder():
        ref = x.referenced if x.kind == CK.DECL_REF_EXPR else None
        out.append((x.kind, x.type.get_canonical().spelling, var_key(ref) if ref is not None else None,
                    binary_operator(x) if x.kind == CK.BINARY_OPERATOR else
                    unary_operator(x) if x.kind == CK.UNARY_OPERATOR else None,
                    evaluate(x) if x.kind in (CK.INTEGER_LITERAL, CK.FLOATING_LITERAL, CK.CXX_UNARY_EXPR) else None))
    return out


def _copies_back(c: ci.Cursor, d, h) -> bool:
    if c.kind != CK.CALL_EXPR or c.spelling != "cudaMemcpy" or copy_kind(c) != "cudaMemcpyDeviceToHost":
        return False
    args = call_args(c)
    dst, src = variable_of(args[0]), variable_of(args[1])
    return dst is not None and src is not None and var_key(dst) == var_key(h.decl) and var_key(src) == var_key(d.decl)


def _check_between(facts: HostFunction, c: ci.Cursor) -> None:
    """A statement between the two copies: a launch that reads no memory, or a wait."""
    line = c.location.line
    if c.kind == CK.NULL_STMT:
        return
    if c.kind == CK.CALL_EXPR and (c.extent.start.offset, c.extent.end.offset) in facts.launches:
        for x in c.walk_preorder():
            if x.kind == CK.ARRAY_SUBSCRIPT_EXPR or (x.kind == CK.UNARY_OPERATOR and unary_operator(x) == "*"):
                raise Refused(f"the launch at line {line}, between the copies, reads memory")
            if x.kind == CK.MEMBER_REF_EXPR:
                base = next(iter(x.get_children()), None)
                if base is None or base.type.get_canonical().kind == ci.TypeKind.POINTER:
                    raise Refused(f"the launch at line {line}, between the copies, reads memory")
            if x.kind == CK.CALL_EXPR and x != c and x.spelling != "__cudaPushCallConfiguration":
                ref = x.referenced
                if ref is None or ref.kind != CK.CONSTRUCTOR or ref.semantic_parent is None or \
                        ref.semantic_parent.spelling != "dim3":
                    raise Refused(f"the launch at line {line}, between the copies, calls {x.spelling or 'a function'}")
        return
    if c.kind == CK.CALL_EXPR and c.spelling in WAITS and not call_args(c) and spelled_in_file(c, c.spelling):
        return
    raise Refused(f"the statement at line {line}, between the copies, is not a launch or a wait")


def _device_uses(facts: HostFunction, d, copies, loop: tuple[int, int], window: tuple[int, int]) -> int:
    """Checks the uses of ``d``; returns the offset of its first ``cudaFree`` (after the loop)."""
    name = d.decl.spelling
    check_null_init(d.decl)
    if d.decl.extent.start.offset >= loop[0]:
        raise Refused(f"{name} is declared inside the loop")
    allocs = 0
    first_free: int | None = None
    spans = [(c.extent.start.offset, c.extent.end.offset) for c in copies]
    for r in d.refs:
        use = r.cursor.extent.start.offset
        line = r.cursor.location.line
        if any(a <= use < b for a, b in spans):
            continue
        kind, _, _ = device_use(facts, r)
        if kind == "alloc" and use < loop[0]:
            allocs += 1
        elif kind == "launch" and window[0] <= use < window[1]:
            pass
        elif kind == "free" and use >= loop[1]:
            first_free = use if first_free is None else min(first_free, use)
        else:
            raise Refused(f"{name} is used outside the round trip (line {line})")
    if allocs != 1:
        raise Refused(f"{name} is not given memory by exactly one cudaMalloc before the loop")
    if first_free is None:
        raise Refused(f"{name} is not freed after the loop")
    return first_free


def _host_uses(facts: HostFunction, h, copies, loop: tuple[int, int], window: tuple[int, int],
               first_free: int) -> list[ci.Cursor]:
    """Checks the uses of ``h``; returns its ``free`` calls before ``d``'s ``cudaFree``."""
    name = h.decl.spelling
    if h.decl.extent.start.offset >= loop[0]:
        raise Refused(f"{name} is declared inside the loop")
    frees: list[ci.Cursor] = []
    init = initializer_of(h.decl)
    definitions = [init] if init is not None else []
    spans = [(c.extent.start.offset, c.extent.end.offset) for c in copies]
    for r in h.refs:
        use = r.cursor.extent.start.offset
        line = r.cursor.location.line
        if any(a <= use < b for a, b in spans):
            continue
        if window[0] <= use < window[1]:
            raise Refused(f"{name} is used between the copies (line {line})")
        value = assignment_of(facts, r, name)
        if value is not None:
            if use >= loop[0]:
                raise Refused(f"{name} is assigned in or after the loop (line {line})")
            definitions.append(value)
            continue
        level, parent, index = parent_of(r)
        kind = parent.kind if parent is not None else None
        released = (kind == CK.CALL_EXPR and parent.spelling == "free" and index == 1) or kind == CK.CXX_DELETE_EXPR
        if not released:
            if kind == CK.ARRAY_SUBSCRIPT_EXPR and index == 0:
                element_access(r, level, name)
            elif not (kind == CK.CALL_EXPR and parent.spelling in CALLS and not parent.spelling.startswith("cuda")
                      and index >= 1) and not is_test(r, level):
                raise Refused(f"{name} is used otherwise (line {line}): the runtime's table of device "
                              "memory, which then holds it, could see it")
            continue
        if use < loop[0]:
            continue
        if use < loop[1]:
            raise Refused(f"{name} is freed inside the loop (line {line})")
        if use < first_free:
            if kind != CK.CALL_EXPR or not spelled_in_file(parent, "free") or \
                    any(facts.kinds[p] in LOOPS for p in facts.above(r.pos)):
                raise Refused(f"{name} is released before the device array's cudaFree otherwise than by a "
                              f"free spelled in the file, outside loops (line {line})")
            frees.append(parent)
    if len(definitions) != 1 or not is_allocation(definitions[0]):
        raise Refused(f"{name} is not fresh memory from one malloc, calloc or new[] before the loop")
    return frees
