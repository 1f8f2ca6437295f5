"""Which of the runtime's copy, fill and allocation functions a translated program calls only with
sizes below the runtime's large-size paths (``POLYPY_RT_LARGE`` statements, parts/memory.h: from
``POLYPY_RT_POPULATE_BYTES``, 256 KiB, copies and fills populate fresh pages and run on all
cores, and allocations from 2 MiB take huge pages). ``frontend.runtime_slice`` leaves those paths
out of a program where no other call reaches them.

A function is *bounded* when every reference to it in the program's code is the callee of a call
whose size argument is known, below ``BOUND``: a constant expression (``100 * sizeof(float)``,
``N`` with ``#define N 100``, a ``const int``), or a local integer variable whose value at the
call follows from straight-line writes, as a launch's shapes do (``frontend.launch_shapes``:
``size_t bytes = nx * ny * sizeof(float);`` with ``const int nx = 100``). Any other reference (a
size read at run time, a parameter, a template's dependent call, the function's address) leaves
it unbounded: its large paths stay.
"""
from __future__ import annotations

from typing import Callable, Sequence

import clang.cindex as ci

from frontend.clang_setup import preorder
from frontend.launch_shapes import LaunchShapes

CK = ci.CursorKind

# The runtime functions whose size argument (by position) is what reaches the large-size paths:
# their definitions pass it on unchanged (parts/memory.h) and reach no other copy.
SIZE_ARGUMENT = {"cudaMalloc": 1, "cudaMemcpy": 2, "cudaMemset": 2}
# POLYPY_RT_POPULATE_BYTES (parts/memory.h): below it a copy or fill is one plain memcpy or memset,
# and an allocation (rounded to 256 bytes) is below 2 MiB, off huge pages.
BOUND = 256 << 10
_REFERENCES = (CK.DECL_REF_EXPR, CK.OVERLOADED_DECL_REF, CK.MEMBER_REF_EXPR)
_FUNCTIONS = (CK.FUNCTION_DECL, CK.CXX_METHOD, CK.FUNCTION_TEMPLATE, CK.CONSTRUCTOR, CK.DESTRUCTOR)


def bounded_calls(program: Sequence[ci.Cursor], read: Callable[[str], str]) -> frozenset[str]:
    """Those of ``SIZE_ARGUMENT``'s functions that ``program`` (the top-level cursors of the
    program's own code) calls only with sizes known below ``BOUND``; ``read(path)``: a file's text."""
    functions: list[ci.Cursor] = []
    refs: dict[str, list[tuple]] = {name: [] for name in SIZE_ARGUMENT}  # each reference, by its place
    calls: dict[str, list[ci.Cursor]] = {name: [] for name in SIZE_ARGUMENT}
    todo = list(program)
    while todo:
        c = todo.pop()
        kind = c.kind
        if kind in _FUNCTIONS and c.is_definition():
            functions.append(c)
        elif kind in _REFERENCES and c.spelling in refs:
            refs[c.spelling].append(_place(c))
        elif kind == CK.CALL_EXPR and c.spelling in calls:
            calls[c.spelling].append(c)
        todo.extend(c.get_children())
    shapes = LaunchShapes(functions, read)
    out = set()
    for name, sites in calls.items():
        left = list(refs[name])
        for call in sites:  # each call's callee: one reference (the rest are uses other than calls)
            callee = next(iter(call.get_children()), None)
            ref = next((x for x in (preorder(callee) if callee is not None else ())
                        if x.kind in _REFERENCES and x.spelling == name), None)
            if ref is not None and _place(ref) in left:
                left.remove(_place(ref))
        if sites and not left and all(_small(shapes, call, SIZE_ARGUMENT[name]) for call in sites):
            out.add(name)
    return frozenset(out)


def _place(c: ci.Cursor) -> tuple:
    f = c.location.file
    return (f.name if f is not None else None, c.extent.start.offset, c.extent.end.offset)


def _small(shapes: LaunchShapes, call: ci.Cursor, index: int) -> bool:
    args = list(call.get_arguments())
    if index >= len(args):
        return False
    value = shapes.integer(call, args[index])
    return value is not None and 0 <= value < BOUND
