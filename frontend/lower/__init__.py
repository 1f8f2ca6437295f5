"""Lowering one ``__global__`` function (and the device functions it calls) to GPU-form IR.

``KernelBuilder`` walks clang cursors. Statements are emitted into the current block; an
expression whose evaluation has side effects (an assignment, ``i++``, an atomic, an inlined
call) emits them before the statement that uses its value, so IR expressions stay pure.
Device functions are inlined: parameters become fresh locals (or bindings of the caller's
pointers and references), ``return`` becomes an assignment to a result local plus structured
control flow (``polypy.passes.eliminate_returns.remove_returns``).

Everything we cannot translate exactly is refused with a ``UserError`` at its location.

One job per module. ``KernelBuilder`` (``builder``) is the state of one kernel's lowering, not a
class assembled from mixins: each part is a module of functions taking it as their first
argument ``kb``. A part imports the parts below it and reaches the constructs it may meet inside
its own (``kb.statement``, ``kb.expr``, ``kb.scalar``, ``kb.read``, ``kb.lvalue``, ``kb.assign``,
``kb.call``, ...) through the builder's entry points, so that no two parts import each other:

    context       the module being lowered; which cursors are kernels, device, host functions
    helpers       small values and cursor helpers shared by the parts
    statements    statement dispatch, blocks, if, break/continue/return
    declarations  locals, pointers, references, shared and per-thread arrays, initializers
    loops         while, do, for (counted loops become ``For``)
    switch        switch statements, as if/else chains or with a fallthrough flag
    expressions   literals, names, operators, conditionals (dispatch by cursor kind)
    casts         conversions to numbers, pointer views, records
    places        lvalues, records, stores
    calls         intrinsics, math functions, atomics, shuffles, votes, refused calls
    cooperative   cooperative groups (polypy's <cooperative_groups.h>) onto barriers, shuffles, votes
    groups        a cooperative group's record, rank, size and lanes
    inlining      device functions inlined at their call sites
    members       constructors, methods, ``this``
    lambdas       closures and their calls
    accessors     PyTorch's packed tensor accessors
"""
from __future__ import annotations

from frontend.lower.builder import KernelBuilder
from frontend.lower.context import (
    CK, ModuleContext, decl_key, function_body, has_attr, is_device_decl, is_host_decl, is_kernel_decl,
    is_prelude_decl, sanitize,
)


__all__ = [
    "CK", "KernelBuilder", "ModuleContext", "decl_key", "function_body", "has_attr", "is_device_decl",
    "is_host_decl", "is_kernel_decl", "is_prelude_decl", "sanitize",
]
