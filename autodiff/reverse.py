"""Reverse mode: a GPU-form kernel ``K`` -> ``K_grad`` (forward sweep, then reverse sweep, per thread).

::

    kernel K_grad(<K's parameters with shadows>) {
      <zero the shadows of shared/local arrays>; barrier
      <forward sweep: K's body, plus tape stores and loop counters>
      <adjoint variables = 0>
      <reverse sweep: K's statements backwards, each replaced by its adjoint>
      <block reductions of scalar-parameter adjoints; one atomic per block>
    }

The work is cut at its seams, as functions over one explicit state (``autodiff.reverse_state``:
``ReverseState``, made by ``start``; JAX's ``backward_pass`` keeps its state in one local
environment the same way); ``build`` combines the parts:

* ``autodiff.sweeps``        the forward sweep and the reverse sweep: statements backwards,
  cotangents through expressions (linear operations by their transpose, others by partials);
* ``autodiff.accumulation``  where a cotangent is added: adjoint registers, and for loads
  plain / block window / block reduction / atomic;
* ``autodiff.availability``  forward values in the reverse sweep: read, recomputed, closed
  forms, replays of shared arrays and loop-carried values;
* ``autodiff.tapes``         values stored by the forward sweep, indexed by loop iteration.

Each module imports only the ones below it: sweeps -> accumulation -> availability -> tapes ->
reverse_state.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from autodiff import build as b
from autodiff.accumulation import end_reductions
from autodiff.activity import Activity, ActiveParams
from autodiff.names import Names
from autodiff.report import Caching, Decision
from autodiff.reverse_state import Intervals, ReverseOptions, ReverseState, start, var_type
from autodiff.shadows import interleave_dynamic_shared, shadow_disjoint, zero_local, zero_shared
from autodiff.sweeps import forward_sweep, merge_barrier_runs, rev_block
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.poly.windows import Chunk

__all__ = ["ReverseOptions", "build", "reverse_kernel"]


def build(st: ReverseState, name: str) -> n.Kernel:
    """``K_grad`` named ``name``: the reverse sweep is built first (it decides what the forward
    sweep stores), then the forward sweep, then the kernel around both."""
    reverse = rev_block(st, (), "body")
    forward = forward_sweep(st)
    body: list[n.Stmt] = []
    hoisted = []
    for v in sorted(st.hoist):
        hoisted.append(n.Decl(v, var_type(st, v)))
    body += hoisted + st.top_decls + st.windows.declarations()
    body += _zero_shadows(st)
    body += forward
    for v, adj in st.adjoint.items():
        body.append(n.Decl(adj, st.adjoint_type[v], b.zero(st.adjoint_type[v])))
    for reg in st.deferred.values():
        body.append(n.Decl(reg, st.adjoint_type[reg], b.zero(st.adjoint_type[reg])))
    body += reverse
    body += st.windows.flush()
    reductions, reduction_buffers = end_reductions(st)
    body += reductions
    buffers = tuple(st.kernel.buffers) + tuple(st.shadow_buffers) + tuple(st.tapes) + tuple(reduction_buffers)
    buffers += tuple(st.windows.buffers)
    body = merge_barrier_runs(tuple(body))
    while body and isinstance(body[-1], n.Barrier):
        body = body[:-1]  # nothing after it to order
    kernel = n.Kernel(name, st.params, buffers, tuple(body), "gpu", loc=st.kernel.loc,
                      disjoint=shadow_disjoint(st.original, st.param_shadow))
    return interleave_dynamic_shared(kernel, st.dynamic)


def _zero_shadows(st: ReverseState) -> list[n.Stmt]:
    out: list[n.Stmt] = []
    shared = False
    for buf in st.shadow_buffers:
        if buf.space == "shared" and buf.shape is not None:
            out.append(zero_shared(buf, st.names))
            shared = True
        elif buf.space == "local":
            out.append(zero_local(buf, st.names))
    windows = st.windows.zero()
    out += windows
    if shared or windows:
        out.append(n.Barrier())
    return out


def reverse_kernel(kernel: n.Kernel, original: n.Kernel, active: ActiveParams, activity: Activity, names: Names,
                   options: ReverseOptions, report: list[Decision] | None,
                   privacy: Callable[[str], tuple[bool, str]], name: str,
                   windows: Callable[..., object] | None = None, intervals: Intervals | None = None,
                   chunks: dict[str, Chunk] | None = None) -> n.Kernel:
    """``K_grad`` of ``kernel``: with static tapes and recomputation where they do, else (or where
    they cost more) with tapes sized at launch; each attempt builds on a fresh ``ReverseState``."""
    def attempt(fresh: Names, opts: ReverseOptions, decisions: list[Decision] | None) -> n.Kernel:
        return build(start(kernel, original, active, activity, fresh, opts, decisions, privacy, windows,
                           intervals, chunks), name)

    if options.runtime_tapes is not None:
        return attempt(names, options, report)
    # Static tapes and recomputation first; tapes sized at launch where they fail, or where they
    # replay a loop from its entry (the second attempt names things afresh: the first one's
    # names are not in the kernel).
    first: list[Decision] = []
    try:
        result = attempt(names, dataclasses.replace(options, runtime_tapes=False), first)
    except UserError as exc:
        if options.checkpoint_budget is not None:
            # a budget promises memory independent of the trip count: no tape sized at launch
            raise UserError(f"{exc.message} (checkpointing snapshots only the registers a loop carries; without a "
                            f"checkpoint budget a tape sized at launch would hold these values)", exc.loc,
                            notes=exc.notes) from None
        try:
            reserved = {name} | {c.first for c in (chunks or {}).values()}  # chosen before: still ours
            return attempt(Names(kernel, reserved), dataclasses.replace(options, runtime_tapes=True), report)
        except UserError:
            raise exc from None
    replayed = [d for d in first if isinstance(d, Caching) and d.strategy == "replay-loop"]
    if replayed and options.checkpoint_budget is None:
        # Cost estimate (issue 38 item 3): replaying a loop of T iterations from its entry costs
        # T (T + 1) / 2 evaluations of the carried values per thread, a tape sized at launch T
        # stores and T loads; T is not known statically, and past T = 3 the tape is cheaper. The
        # tape holds T values per carried register and thread (the replay: none).
        second: list[Decision] = []
        try:
            reserved = {name} | {c.first for c in (chunks or {}).values()}
            taped = attempt(Names(kernel, reserved), dataclasses.replace(options, runtime_tapes=True), second)
        except UserError:
            taped = None
        still = {(d.value, d.loc) for d in second if isinstance(d, Caching) and d.strategy == "replay-loop"}
        taped_instead = [d for d in replayed if (d.value, d.loc) not in still]
        if taped is not None and taped_instead:  # (a loop whose trip count is unknown at launch still replays)
            if report is not None:
                report.extend(second)
                report.extend(Caching(d.value, d.loc, "tape", "a tape sized at launch instead of replaying the loop "
                                      "from its entry in each reversed iteration (cost estimate: T stores and T "
                                      "loads against T (T + 1) / 2 replayed steps for T iterations)")
                              for d in taped_instead)
            return taped
    if report is not None:
        report.extend(first)
    return result
