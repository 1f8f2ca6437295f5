"""Privacy of one shared-memory access per barrier interval: what a tree reduction's adjoint needs.

``polypy.poly.sharing`` asks whether two threads *ever* access one element. In a tree reduction::

    red[tid] = v;  __syncthreads();
    for (s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        __syncthreads();
    }

every element of ``red`` is shared between threads across iterations, so that answer is "shared"
and the gradient's ``d_red[tid + s] += ct`` became an atomic. A gradient needs less: two updates
of one adjoint element by different threads must not happen *between the same two barriers*.
The reverse sweep runs the kernel's barriers in reverse, so the adjoint updates of two reads lie
between the same two barriers exactly when the reads do; reads separated by a barrier give
updates the reversed barrier orders. (A read and a write of one element by different threads
between the same barriers would be a race in the kernel itself.)

``interval_private(kernel, path, load)`` answers that question for the read ``load`` of a shared
array in the statement at ``path``, where its barrier interval is one iteration of a loop:

* the innermost loop around the statement holds exactly one barrier, directly in its body, and
  the statement comes before it; the statements after the barrier (the update ``s >>= 1``) and
  the loop condition do not touch the array;
* in the statement list holding the loop, a barrier comes before the loop (or the loop is at the
  top of the kernel), with no access to the array in between: iteration 0's interval starts
  there.

Then every instance in the access's interval belongs to one iteration of the loop, where each
block-uniform variable the loop updates (``s``: assigned only by its declaration and by
top-level statements after the barrier, from uniform values) has one value for all threads.
The question goes to isl on a kernel made of that iteration -- ``if (cond) { statements before
the barrier }``, those variables as integer parameters, every other local declared outside the
loop unknown unless it is an unassigned copy of uniform or thread-index values -- and asks
whether two threads of a block can touch one element with the access and any access of the array
there (``sharing``'s pairwise question, one block). Anything else: not proven (False).
"""
from __future__ import annotations

import dataclasses

from polypy.analysis.uniformity import thread_dependent_names
from polypy.ir import nodes as n
from polypy.ir.queries import written_names
from polypy.ir.visitor import walk, walk_block
from polypy.poly.model import build_model
from polypy.poly.paths import StmtPath, statement_accesses, statement_at
from polypy.poly.relations import Copies


def interval_private(kernel: n.Kernel, path: StmtPath, load: n.Load) -> tuple[bool, str]:
    """Whether no other thread of the block touches the element ``load`` reads (in the statement
    at ``path`` of the GPU-form ``kernel``) between the same two barriers; with the reason."""
    buffer = load.buffer
    if kernel.space(buffer) != "shared":
        return False, "not a shared array"
    found = _loop_of(kernel, path)
    if found is None:
        return False, "not inside a loop"
    loop_path, loop = found
    if not isinstance(loop, n.While):
        return False, "its loop is a counted loop (no halving variable to take as a parameter)"
    body = loop.body + loop.update
    barriers = [i for i, s in enumerate(loop.body) if isinstance(s, n.Barrier)]
    if len(barriers) != 1 or sum(isinstance(x, n.Barrier) for x in walk_block(body)) != 1:
        return False, "its loop does not hold exactly one barrier, at the top of its body"
    cut = barriers[0]
    position = path[len(loop_path)]
    if position[0] != "body" or position[1] >= cut:
        return False, "it does not come before its loop's barrier"
    after = body[cut + 1:]
    if _touches(after, buffer) or _touches_expr(loop.cond, buffer):
        return False, "the loop touches the array after its barrier or in its condition"
    if not _interval_starts_before(kernel, loop_path, buffer):
        return False, "no barrier before the loop closes the interval of its first iteration"
    uniform = _iteration_uniform(kernel, loop, after)
    if uniform is None:
        return False, "a variable of the loop is not block-uniform"
    iteration = _iteration_kernel(kernel, loop, loop.body[:cut], uniform)
    target = (("body", len(iteration.body) - 1), ("then", position[1])) + path[len(loop_path) + 1:]
    index = next((raw.index for raw in statement_accesses(statement_at(iteration, target)) if raw.node is load), None)
    if index is None:
        return False, "the access was not found"
    model = build_model(iteration)
    mine = [a for a in model.accesses_of(buffer) if a.id.path == target and a.id.index == index]
    if len(mine) != 1:
        return False, "the access was not found"
    c = Copies(model, ("1", "2"))
    pieces = c.other_thread_pieces("1", "2")
    for other in model.accesses_of(buffer):
        overlap = c.overlap(mine[0], "1", other, "2")
        if overlap is None:
            continue
        pairs = c.domain(mine[0], "1") & c.domain(other, "2") & overlap
        if any(not (pairs & piece).is_empty() for piece in pieces):
            return False, "isl: threads may access the same element between the same two barriers"
    return True, ("isl: no other thread of the block accesses the element between the same two barriers "
                  "(one iteration of the loop at line "
                  f"{loop.loc.line if loop.loc is not None else '?'})")


def _loop_of(kernel: n.Kernel, path: StmtPath) -> tuple[StmtPath, n.Stmt] | None:
    """The innermost loop enclosing the statement at ``path`` (not the statement itself)."""
    for depth in range(len(path) - 1, 0, -1):
        stmt = statement_at(kernel, path[:depth])
        if isinstance(stmt, (n.While, n.For)):
            return path[:depth], stmt
    return None


def _touches(stmts: tuple[n.Stmt, ...], buffer: str) -> bool:
    return any(isinstance(x, (n.Load, n.Store, n.AtomicRMW)) and x.buffer == buffer for x in walk_block(stmts))


def _touches_expr(e: n.Expr, buffer: str) -> bool:
    return any(isinstance(x, n.Load) and x.buffer == buffer for x in walk(e))


def _interval_starts_before(kernel: n.Kernel, loop_path: StmtPath, buffer: str) -> bool:
    """A barrier precedes the loop in its statement list (or the list is the kernel's body),
    and nothing between it and the loop touches ``buffer``."""
    field, index = loop_path[-1]
    siblings = getattr(statement_at(kernel, loop_path[:-1]), field) if len(loop_path) > 1 else kernel.body
    for s in reversed(siblings[:index]):
        if isinstance(s, n.Barrier):
            return True
        if _touches((s,), buffer) or any(isinstance(x, n.Barrier) for x in walk(s)):
            return False
    return len(loop_path) == 1


def _iteration_uniform(kernel: n.Kernel, loop: n.While, after: tuple[n.Stmt, ...]) -> set[str] | None:
    """The variables the loop assigns after its barrier, if each has one value for all threads
    of a block (``polypy.analysis.uniformity``) through the part before the barrier: assigned
    nowhere else (top-level assignments after the barrier only) and declared outside the loop
    with an initial value; else None."""
    late = {s.name for s in after if isinstance(s, n.Assign)}
    if written_names(after) - late:
        return None
    decls = {x.name: x for x in walk(kernel) if isinstance(x, n.Decl)}
    in_loop = {x.name for x in walk_block(loop.body + loop.update) if isinstance(x, n.Decl)}
    divergent = thread_dependent_names(kernel)
    for name in late:
        d = decls.get(name)
        if d is None or d.init is None or d.vtype.is_float or name in in_loop or name in divergent:
            return None
        values = sum(isinstance(s, n.Assign) and s.name == name for s in after)
        if sum(isinstance(x, n.Assign) and x.name == name for x in walk(kernel)) != values:
            return None  # assigned before the barrier, or outside the loop
    return late


def _iteration_kernel(kernel: n.Kernel, loop: n.While, before: tuple[n.Stmt, ...], uniform: set[str]) -> n.Kernel:
    """``if (cond) { before }`` as a kernel: ``uniform`` as integer parameters; locals declared
    outside the loop kept with their initial value where never assigned, else unknown."""
    decls = {x.name: x for x in walk(kernel) if isinstance(x, n.Decl)}
    inside = {x.name for x in walk_block(before) if isinstance(x, n.Decl)}
    written = written_names(kernel.body)
    need: list[str] = []

    def use(e_or_s) -> None:
        for x in walk(e_or_s):
            if isinstance(x, n.Var) and x.name in decls and x.name not in inside and x.name not in uniform \
                    and x.name not in need:
                need.append(x.name)
                d = decls[x.name]
                if x.name not in written and d.init is not None:
                    use(d.init)

    cond = loop.cond
    for name in sorted(uniform):
        bound = _upper_bound(name, decls[name], loop, uniform)
        if bound is not None:
            cond = n.Binary("land", cond, bound)
    use(cond)
    for s in before:
        use(s)
    prelude: list[n.Stmt] = []
    for name in reversed(need):  # a local's initial value only uses locals found after it
        d = decls[name]
        init = d.init
        if name in written or init is None or any(isinstance(x, n.Load) for x in walk(init)):
            init = None  # unknown (a load's value may have changed since)
        prelude.append(n.Decl(name, d.vtype, init, loc=d.loc))
    params = kernel.params + tuple(n.Param(name, decls[name].vtype) for name in sorted(uniform))
    body = tuple(prelude) + (n.If(cond, before, (), loc=loop.loc),)
    return dataclasses.replace(kernel, params=params, body=body)


def _upper_bound(name: str, decl: n.Decl, loop: n.While, uniform: set[str]) -> n.Expr | None:
    """``name <= init`` where every value of ``name`` in the loop is at most its initial value:
    each update is ``name >> c`` or ``name / c`` (``c`` a positive literal; a shift by a
    non-negative one) of a value the loop condition keeps non-negative (``name`` unsigned, or a
    condition ``name > c`` / ``name >= c`` with a literal ``c >= 0``). A halving loop's ``s`` is
    then at most ``blockDim.x / 2``, which keeps its index arithmetic from wrapping in the model."""
    ty = decl.vtype
    if decl.init is None or any(isinstance(x, n.Var) and x.name in uniform for x in walk(decl.init)):
        return None  # the initial value must not move with the loop
    updates = [x.value for x in walk_block(loop.body + loop.update) if isinstance(x, n.Assign) and x.name == name]
    for u in updates:
        if not (isinstance(u, n.Binary) and u.op in ("shr", "div") and isinstance(u.a, n.Var) and u.a.name == name
                and isinstance(u.b, n.Const) and int(u.b.value) >= (0 if u.op == "shr" else 1)):
            return None
    if ty.is_signed and not _keeps_non_negative(loop.cond, name):
        return None
    return n.Binary("le", n.Var(name, ty), decl.init)  # type: ignore[arg-type]


def _keeps_non_negative(cond: n.Expr, name: str) -> bool:
    """``cond`` is ``name > c`` or ``name >= c`` (or ``c < name``, ``c <= name``) with ``c >= 0``."""
    if not isinstance(cond, n.Binary):
        return False
    if cond.op in ("gt", "ge") and isinstance(cond.a, n.Var) and cond.a.name == name and isinstance(cond.b, n.Const):
        return int(cond.b.value) >= 0
    if cond.op in ("lt", "le") and isinstance(cond.b, n.Var) and cond.b.name == name and isinstance(cond.a, n.Const):
        return int(cond.a.value) >= 0
    return False
