"""Automatic differentiation of GPU-form kernels (the Enzyme approach, on polypy's structured IR).

``differentiate(kernel, mode="reverse")`` returns ``K_grad``: the forward sweep and then the
reverse sweep of each thread in one GPU-form kernel, in the calling convention of DESIGN.md.
``mode="forward"`` returns ``K_fwd`` (tangents). Modules, one job each:

* ``rules``     derivative rules keyed by operation (partials, and linear rules with transposes)
* ``activity``  which parameters, variables and arrays carry derivatives
* ``normalize`` loops without break/continue/update blocks, ready to be reversed
* ``program``   statement paths, writers, reaching definitions
* ``loops``     trip-count bounds, induction variables and their closed forms
* ``shadows``   the calling convention and shadow arrays
* ``reverse``   reverse mode: ``build`` combining the four parts below, over one state
* ``reverse_state`` that state (``ReverseState``), passed to the parts' functions; the options
* ``sweeps``    the forward sweep, and the reverse sweep (statements backwards, cotangents)
* ``accumulation`` where cotangents are added (plain, window, block reduction, atomic)
* ``availability`` forward values in the reverse sweep (read, recomputed, replayed)
* ``tapes``     values stored by the forward sweep per loop iteration
* ``shuffles``  warp shuffles transposed
* ``reductions`` block-level reductions of per-thread adjoint sums
* ``windows``   block windows: a block's contributions to a read-only input summed in shared memory
* ``chunks``    block windows per chunk of a serial loop (and the guards moved into the loop for them)
* ``gather``    a gradient split into tap launches (plain adds to a read-only input's shadow) and the rest,
                for the CPU, where launches run in sequence
* ``forward``   forward mode
* ``report``    the decisions ``--report`` prints
* ``check``     finite-difference and dot-product checks with the emulator
* ``build``, ``names``  expression builders, fresh names

The pipeline around it (optimize before, simplify after) is ``polypy.driver.gradients``; this package
only transforms one kernel and never imports other stages.
"""
from __future__ import annotations

from typing import Callable

from autodiff.availability import CannotTape
from autodiff.activity import ActiveParams, analyze_activity, select_active
from autodiff.chunks import plan_chunks
from autodiff.forward import forward_kernel
from autodiff.names import Names
from autodiff.normalize import normalize_for_ad
from autodiff.split_long import split_long_expressions
from autodiff.report import Accumulation, Caching, Decision
from autodiff.reverse import ReverseOptions, reverse_kernel
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.queries import buffers_written
from polypy.ir.types import PointerType
from polypy.ir.visitor import walk_only

Privacy = Callable[[str], "tuple[bool, str]"]


def _no_proof(buffer: str) -> tuple[bool, str]:
    return False, "no proof that the elements are private to a thread"


def differentiate(kernel: n.Kernel, *, mode: str = "reverse", wrt: tuple[str, ...] | None = None,
                  const: tuple[str, ...] = (), name: str | None = None, options: ReverseOptions | None = None,
                  report: list[Decision] | None = None, privacy: Privacy | None = None,
                  windows: Callable[[str], object] | None = None,
                  intervals: Callable[..., tuple[bool, str]] | None = None) -> n.Kernel:
    """``K_grad`` (reverse) or ``K_fwd`` (forward) of a GPU-form kernel without ``return``.

    ``privacy(buffer)`` answers whether every element of ``buffer`` is accessed by at most one
    thread of the grid (with a reason, for the report); without it every accumulation into a
    shared or global shadow is atomic. ``windows(buffer)`` gives the block window of a read-only
    buffer (``polypy.poly.block_window``: a ``Window`` or the reason there is none), and
    ``windows(buffer, kernel, chunk)`` the window of one chunk of a serial loop of ``kernel``
    (``polypy.poly.chunk_window``, ``autodiff.chunks``); without it no adjoint is privatized per
    block. ``intervals(kernel, path, load)`` answers whether no other
    thread of the block touches the element a shared-array load reads between the same two
    barriers (``polypy.poly.intervals``); its adjoint is then a plain update.
    """
    if kernel.stage != "gpu":
        raise UserError(f"kernel '{kernel.name}' is in {kernel.stage} form; polypy grad differentiates GPU-form "
                        f"kernels", kernel.loc)
    if mode not in ("reverse", "forward"):
        raise UserError(f"unknown differentiation mode '{mode}' (reverse or forward)")
    for x in walk_only(kernel, n.Launch):
        if isinstance(x, n.Launch):  # the child's effects happen after the grid: no adjoint of them here
            raise UserError(f"cannot differentiate kernel '{kernel.name}': it launches kernel '{x.kernel}' from "
                            "device code (dynamic parallelism), which polypy grad does not differentiate", x.loc)
    active = select_active(kernel, wrt, const)
    suffix = "_grad" if mode == "reverse" else "_fwd"
    out_name = name if name is not None else kernel.name + suffix
    names = Names(kernel, {out_name})
    if mode == "forward":
        kernel = split_long_expressions(kernel, names)
        activity = analyze_activity(kernel, active)
        return forward_kernel(kernel, active, activity, names, out_name)
    normalized = split_long_expressions(normalize_for_ad(kernel, names), names)
    chunks: dict = {}
    if windows is not None and (options is None or options.windows):
        normalized, chunks = _plan_chunks(normalized, active, windows, privacy, names)
    activity = analyze_activity(normalized, active)
    decisions: list[Decision] | None = [] if report is not None else None
    try:
        result = reverse_kernel(normalized, kernel, active, activity, names, options or ReverseOptions(), decisions,
                                privacy or _no_proof, out_name, windows, intervals if privacy is not None else None,
                                chunks)
    except CannotTape as exc:  # no strategy left for a value (every fallback tried): refused, located
        raise UserError(f"cannot differentiate kernel '{kernel.name}': a value cannot be recovered for the reverse "
                        f"sweep: {exc.reason}", kernel.loc) from None
    if report is not None and decisions is not None:
        report.extend(sorted(decisions, key=_where))
    return result


def _plan_chunks(kernel: n.Kernel, active: ActiveParams, windows: Callable[..., object],
                 privacy: Privacy | None, names: Names) -> tuple[n.Kernel, dict]:
    """Chunked windows (``autodiff.chunks``) for the active read-only inputs that are not private."""
    written = buffers_written(kernel)
    candidates = tuple(p.name for p in kernel.params if p.name in active.pointers and p.name not in written
                       and isinstance(p.ptype, PointerType) and p.ptype.elem.is_float
                       and not (privacy is not None and privacy(p.name)[0]))
    if not candidates:
        return kernel, {}
    return plan_chunks(kernel, candidates, windows, lambda buffer, k, chunk: windows(buffer, k, chunk),
                       lambda var: names.fresh(f"{var}_first"))


def _where(d: Decision) -> tuple:
    loc = d.loc
    return (loc.file, loc.line, loc.col) if loc is not None else ("", 0, 0)


__all__ = ["differentiate", "ReverseOptions", "ActiveParams", "select_active", "Accumulation", "Caching",
           "Decision"]
