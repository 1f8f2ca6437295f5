"""Shared-memory store->load forwarding and dead shared stores.

``forward_shared_stores`` — requires a GPU-form kernel; guarantees the same results. A load
from a shared array that provably reads what the *same thread* stored earlier (the last
instance of that store in the thread writes exactly the element read, and no write of this
or any other thread can come in between — ``polypy.poly.dataflow``) is replaced by a local
that the store's statement fills with the stored value. The value is computed once, where
the store computed it, so nothing moves across a barrier::

    weights[ty][tx] = hidden[i]           var weights_fwd: f32 = hidden[i]
    barrier                         ->    weights[ty][tx] = weights_fwd
    weights[ty][tx] = weights[ty][tx]     barrier
                      * node[ty]          weights[ty][tx] = weights_fwd * node[ty]

The local is declared right before the store when every forwarded load comes later in the
same block (a constant or a never-assigned variable stored there is used directly); otherwise (a load after the enclosing ``if``/loop, or in a later iteration) it
is declared, uninitialized, at the top of the kernel and assigned before the store.

``eliminate_dead_shared_stores`` — same requirements and guarantee. A store to shared memory
whose value no thread can read before the same thread overwrites it (or before the block
ends) is deleted; stores are removed one at a time and the rest re-checked. After the
forwarding above, ``weights[ty][tx] = weights_fwd`` is such a store, and the barrier after it
then orders nothing on ``weights``.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.names import NameSupply, kernel_names
from polypy.ir.queries import written_names
from polypy.poly import (
    AccessId, StmtPath, dead_shared_stores, edit_statements, forwardable_loads, replace_loads,
    statement_accesses, statement_at,
)


def forward_shared_stores(kernel: n.Kernel) -> n.Kernel:
    """Replace provably same-thread shared loads by the stored values (see module docstring)."""
    if not _has_shared(kernel):
        return kernel
    forwardings = forwardable_loads(kernel)
    if not forwardings:
        return kernel
    names = NameSupply(kernel_names(kernel))
    by_store: dict[StmtPath, list[AccessId]] = {}
    for f in forwardings:
        by_store.setdefault(f.store, []).append(f.load)

    load_maps: dict[StmtPath, dict[int, n.Expr]] = {}
    store_locals: dict[StmtPath, tuple[str, bool]] = {}  # path -> (local, declared at the store)
    top_decls: list[n.Stmt] = []
    assigned = written_names(kernel.body)
    for store_path, loads in by_store.items():
        store = statement_at(kernel, store_path)
        assert isinstance(store, n.Store)
        elem = kernel.elem_type(store.buffer)
        local_here = all(_later_in_block(store_path, load.path) for load in loads)
        value = store.value
        if local_here and (isinstance(value, n.Const) or (isinstance(value, n.Var) and value.name not in assigned)):
            # A constant or a never-assigned variable in scope at the store: use it directly.
            replacement: n.Expr = value
        else:
            name = names.fresh(f"{store.buffer}_fwd")
            store_locals[store_path] = (name, local_here)
            if not local_here:
                top_decls.append(n.Decl(name, elem, None, loc=store.loc))
            replacement = n.Var(name, elem)
        for load in loads:
            node = _load_node(statement_at(kernel, load.path), load.index)
            load_maps.setdefault(load.path, {})[load.index] = dataclasses.replace(replacement, loc=node.loc)

    def edit_for(path: StmtPath):
        def edit(stmt: n.Stmt) -> tuple[n.Stmt, ...]:
            loads = load_maps.get(path)
            if loads:
                stmt = replace_loads(stmt, loads)
            local = store_locals.get(path)
            if local is None:
                return (stmt,)
            assert isinstance(stmt, n.Store)
            name, here = local
            elem = kernel.elem_type(stmt.buffer)
            value = stmt.value
            set_local: n.Stmt = n.Decl(name, elem, value, loc=stmt.loc) if here else \
                n.Assign(name, value, loc=stmt.loc)
            return (set_local, dataclasses.replace(stmt, value=n.Var(name, elem, loc=value.loc)))
        return edit

    paths = set(load_maps) | set(store_locals)
    result = edit_statements(kernel, {p: edit_for(p) for p in paths})
    if top_decls:
        result = dataclasses.replace(result, body=tuple(top_decls) + result.body)
    return result


def eliminate_dead_shared_stores(kernel: n.Kernel) -> n.Kernel:
    """Delete shared stores whose values are never read (see module docstring)."""
    if not _has_shared(kernel):
        return kernel
    while True:
        dead = dead_shared_stores(kernel)
        if not dead:
            return kernel
        kernel = edit_statements(kernel, {dead[0]: lambda stmt: ()})


def _has_shared(kernel: n.Kernel) -> bool:
    return any(b.space == "shared" for b in kernel.buffers)


def _later_in_block(store: StmtPath, load: StmtPath) -> bool:
    """Whether ``load`` is in the block of ``store``, at a later statement or nested in one."""
    depth = len(store) - 1
    if len(load) <= depth or load[:depth] != store[:depth]:
        return False
    field, index = load[depth]
    return field == store[depth][0] and index > store[depth][1]


def _load_node(stmt: n.Stmt, index: int) -> n.Load:
    node = statement_accesses(stmt)[index].node
    assert isinstance(node, n.Load)
    return node

