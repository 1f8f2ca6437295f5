"""Chunked block windows: a block window per tile of a serial loop (``polypy.poly.chunk_window``).

A read-only input read inside a serial loop of unknown length (gemm's ``a[i * NK + k]`` and
``b[k * NJ + j]`` in ``for (k = 0; k < nk; k++)``) has no block window over the whole kernel:
what one block reads grows with ``nk``. What it reads in ``CHUNK_TRIPS`` consecutive iterations
is bounded, though, so the reverse sweep runs the reversed loop a chunk at a time::

    for (rc = 0; rc < count; rc += CHUNK_TRIPS) {      (every thread of the block)
      first = <the chunk's smallest loop-variable value>
      zero the chunk's windows; barrier
      for (r = rc; r < min(rc + CHUNK_TRIPS, count); r++) { <reversed body, adding into the windows> }
      barrier; flush the windows into d_X
    }

The barriers need every thread of the block to run that loop: its bounds must be
launch-uniform and it must not sit inside a branch. gemm's loop does, inside ``if (i < ni &&
j < nj)``. ``sink_guards`` moves such branches into the loop first::

    if (c) { A; for (k ...) { S }; B } else { E }
      ->   if (c) { A } else { E };  for (k ...) { if (c) { S } };  if (c) { B }

which is the same program when nothing in the branch writes what ``c`` reads (``c`` is then
evaluated to the same value each time). Declarations of ``A`` that the loop or ``B`` read
become assignments to a declaration placed before the branch. The forward sweep runs the sunk
form too; a compiler unswitches the invariant test again.

``plan_chunks`` picks, per read-only input, the loop whose chunks get a window: only where the
whole-kernel window fails and a chunk window exists (so kernels that do not need it keep their
shape).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from autodiff import build as b
from autodiff.loops import launch_uniform
from autodiff.program import Program
from polypy.ir import nodes as n
from polypy.ir.queries import declared_names, read_names, written_names
from polypy.ir.visitor import walk
from polypy.poly.paths import StmtPath, child_blocks, edit_statements, iter_statements, statement_at
from polypy.poly.windows import Chunk, Window

# Iterations of the serial loop per chunk: a window of T rows of gemm's b and T columns of its a.
CHUNK_TRIPS = 16

# (buffer, kernel, chunk) -> Window | reason
ChunkOracle = Callable[[str, n.Kernel, Chunk], object]


def plan_chunks(kernel: n.Kernel, candidates: tuple[str, ...], whole: Callable[[str], object],
                chunk_oracle: ChunkOracle, first_name: Callable[[str], str]) -> tuple[n.Kernel, dict[str, Chunk]]:
    """The kernel (with guards sunk where that makes a chunk window possible) and, per buffer of
    ``candidates`` that gets one, its chunk. ``whole(buffer)``: the whole-kernel window (a chunk is
    only tried where it is a reason); ``first_name(loop_var)``: a fresh name for a chunk's first
    value."""
    chunks: dict[str, Chunk] = {}
    firsts: dict[StmtPath, str] = {}
    for buffer in candidates:
        if not isinstance(whole(buffer), str):
            continue
        loop = _enclosing_loop(kernel, buffer)
        if loop is None:
            continue
        sunk = sink_guards(kernel, loop)
        if sunk is None:
            continue
        new_kernel, top = sunk
        for_loop = statement_at(new_kernel, top)
        assert isinstance(for_loop, n.For)
        first = firsts.get(top) if new_kernel is kernel else None
        if first is None:
            first = first_name(for_loop.var)
        chunk = Chunk(top, CHUNK_TRIPS, first)
        window = chunk_oracle(buffer, new_kernel, chunk)
        if not isinstance(window, Window):
            continue
        if new_kernel is not kernel:  # sinking moved statements: earlier chunks' paths are stale
            if chunks:
                continue
            kernel = new_kernel
        chunks[buffer] = chunk
        firsts[top] = first
    return kernel, chunks


def _enclosing_loop(kernel: n.Kernel, buffer: str) -> StmtPath | None:
    """The outermost ``for`` holding every read of ``buffer``, if no loop encloses it and its
    bounds are launch-uniform (parameters the kernel never assigns, launch dimensions)."""
    loads = sum(1 for x in walk(kernel) if isinstance(x, n.Load) and x.buffer == buffer)
    if not loads:
        return None
    prog = Program(kernel)
    for path, s in iter_statements(kernel.body):
        if not isinstance(s, n.For):
            continue
        if sum(1 for x in walk(s) if isinstance(x, n.Load) and x.buffer == buffer) != loads:
            continue
        if any(isinstance(statement_at(kernel, path[:d]), (n.For, n.While)) for d in range(1, len(path))):
            return None
        if not (isinstance(s.step, n.Const) and s.step.value > 0):
            return None
        if not all(launch_uniform(prog, e) for e in (s.start, s.stop)):
            return None
        return path
    return None


def sink_guards(kernel: n.Kernel, loop: StmtPath) -> tuple[n.Kernel, StmtPath] | None:
    """``kernel`` with every ``if`` around the loop at ``loop`` moved into the loop's body (see the
    module docstring), and the loop's new path (top level); None where a condition may change."""
    while len(loop) > 1:
        parent_path, (field, index) = loop[:-1], loop[-1]
        parent = statement_at(kernel, parent_path)
        if not isinstance(parent, n.If) or field not in ("then", "orelse"):
            return None
        sunk = _sink_one(parent, field, index)
        if sunk is None:
            return None
        replacement, at = sunk
        block_path, (pfield, pindex) = parent_path[:-1], parent_path[-1]
        kernel = _splice(kernel, block_path, pfield, pindex, replacement)
        loop = block_path + ((pfield, pindex + at),)
    return kernel, loop


def _sink_one(s: n.If, field: str, index: int) -> tuple[list[n.Stmt], int] | None:
    """``s`` (whose branch ``field`` holds the loop at ``index``) as statements: the branch before
    the loop, the loop with the test inside, the branch after it; and the loop's position."""
    cond = s.cond
    if any(isinstance(x, (n.Load, n.Call)) for x in walk(cond)):
        return None  # only registers and arguments: nothing else is surely unchanged
    if read_names(cond) & (written_names(s) | declared_names(s)):
        return None
    if any(isinstance(x, n.Barrier) for x in walk(s)):
        return None  # a barrier under a condition: the branch is block-uniform already
    branch = getattr(s, field)
    loop = branch[index]
    assert isinstance(loop, n.For)
    before, after = list(branch[:index]), list(branch[index + 1:])
    later = read_names(loop) | read_names(tuple(after))
    hoisted: list[n.Stmt] = []
    for i, stmt in enumerate(before):
        if isinstance(stmt, n.Decl) and stmt.name in later:
            hoisted.append(n.Decl(stmt.name, stmt.vtype, loc=stmt.loc))
            before[i] = n.Assign(stmt.name, stmt.init, loc=stmt.loc) if stmt.init is not None else None
    before = [x for x in before if x is not None]
    if read_names((loop.start, loop.stop, loop.step)) & declared_names(branch):
        return None
    other = s.orelse if field == "then" else s.then
    taken = cond if field == "then" else b.lnot(cond)  # the condition under which the loop runs
    guarded = dataclasses.replace(loop, body=(n.If(taken, loop.body, loc=s.loc),))
    out: list[n.Stmt] = list(hoisted)
    head = (tuple(before), other) if field == "then" else (other, tuple(before))
    if head[0] or head[1]:
        out.append(n.If(cond, head[0], head[1], loc=s.loc))
    at = len(out)
    out.append(guarded)
    if after:
        out.append(n.If(taken, tuple(after), loc=s.loc))
    return out, at


def _splice(kernel: n.Kernel, block_path: StmtPath, field: str, index: int, stmts: list[n.Stmt]) -> n.Kernel:
    """``kernel`` with the statement ``index`` of the block ``field`` under ``block_path`` replaced
    by ``stmts``."""
    def edit(block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        return block[:index] + tuple(stmts) + block[index + 1:]
    if not block_path:
        return dataclasses.replace(kernel, body=edit(kernel.body))
    owner = statement_at(kernel, block_path)
    new_owner = dataclasses.replace(owner, **{field: edit(dict(child_blocks(owner))[field])})
    return edit_statements(kernel, {block_path: lambda _: (new_owner,)})
