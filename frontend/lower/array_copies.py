"""Copies of whole local arrays: what a lambda capturing an array by value holds (``[=]`` or
``[a]`` naming a local ``float a[3]``: C++ copies each element into the closure object when the
lambda is evaluated), and what a copy of such a closure holds.

A copy is a fresh local buffer of the array's shape, filled element by element (one counted loop
per dimension), so later writes to the original do not reach it and writes through the copy (a
``mutable`` lambda's) do not reach the original."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import I32

from frontend.values import ArrayBinding, RecLV

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def copy_array(kb: KernelBuilder, binding: ArrayBinding, name: str, c: ci.Cursor) -> ArrayBinding:
    """A fresh local array holding a copy of every element of local array ``binding``."""
    source = kb.buffers.get(binding.buffer)
    where = kb.loc(c)
    record = binding.layout.record
    if source is None or source.space != "local" or binding.stored is not None or \
            any(d is None for d in binding.dims) or record is not None and record.overlaps:
        raise kb.error(f"a copy of the array '{name}' (not a local array, or of records holding unions) is not "
                       "supported in device code", c)
    if binding.layout.record is not None:  # records of mixed member types: one buffer per type
        copy = kb.record_array(name + "_copy", binding.dims, binding.layout, "local", where)
    else:
        copy_name = kb.names.fresh(name + "_copy")
        kb.buffers[copy_name] = dataclasses.replace(source, name=copy_name, loc=where)
        copy = dataclasses.replace(binding, buffer=copy_name)
    counters = [kb.names.fresh(f"{name}_k{m}") for m in range(len(binding.dims))]
    index = tuple(n.Var(v, I32) for v in counters)
    with kb.sub_block() as body:
        target = kb.element_lv(copy, index, c)
        if isinstance(target, RecLV):
            target = kb.expand_record(target, c)
        kb.assign(target, kb.read(kb.element_lv(binding, index, c), c), c)
    stmts: tuple[n.Stmt, ...] = tuple(body)
    for var, extent in reversed(list(zip(counters, binding.dims))):
        stmts = (n.For(var, I32, n.Const(0, I32), n.Const(int(extent), I32), n.Const(1, I32), stmts, loc=where),)
    for s in stmts:
        kb.emit(s)
    return copy
