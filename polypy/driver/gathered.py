"""Gradients run by polypy on the CPU with the adjoints of read-only inputs in tap launches.

``polypy.grad`` (and through it ``polypy.torch``) runs ``K_grad`` as ``autodiff.gather``'s tap
launches and then the rest of ``K_grad``, all with the kernel's launch and ``K_grad``'s
arguments: on a CPU every block of one launch finishes before the next starts, so the sequence
is exact, and each tap is a plain ``+=`` that isl proves race-free (no atomics, no windows).
``gather_gradient`` decides which inputs are so treated and says why in the report; the
``polypy grad --emit cuda`` output keeps one ``__global__ K_grad`` (the calling convention of
DESIGN.md) and today's forms (``gather_notes`` says what the CPU path does instead).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.queries import buffers_written
from polypy.ir.types import PointerType
from polypy.ir.visitor import walk


def _candidates(module: n.Module, name: str, wrt, const, optimize: bool, privacy_oracle: Callable):
    """(the optimized kernel, its active params, read-only float inputs whose adjoints are not
    already plain, the privacy oracle)."""
    from autodiff import select_active
    from polypy.driver.pipelines import before_ad_pipeline
    from polypy.passes import run_pipeline

    kernel = run_pipeline(module.kernel(name), before_ad_pipeline(optimize=optimize))
    active = select_active(kernel, tuple(wrt) if wrt is not None else None, tuple(const))
    written = buffers_written(kernel)
    oracle = privacy_oracle(kernel)
    out = tuple(p.name for p in kernel.params
                if p.name in active.pointers and p.name not in written and isinstance(p.ptype, PointerType)
                and p.ptype.elem.is_float and not oracle(p.name)[0])
    return kernel, active, out, oracle


def gather_gradient(module: n.Module, name: str, grad_kernel: Callable, privacy_oracle: Callable, *, wrt=None,
                    const=(), report: list | None = None, sweep: bool = True, **options: Any) -> tuple[tuple[n.Kernel, ...], n.Kernel]:
    """(tap kernels, the rest of ``K_grad``): launched in this order with the kernel's launch and
    ``K_grad``'s arguments, they do what ``grad_kernel``'s one kernel does. No taps where no
    input qualifies (then the rest is ``grad_kernel``'s kernel). ``report`` as for
    ``grad_kernel``; the gathered inputs' loads are reported ``gather``, the others say why not.
    ``grad_kernel`` and ``privacy_oracle``: ``polypy.driver.gradients``'s (which imports this module).
    ``sweep``: the taps of one input as one single-sweep launch and its halos where
    ``autodiff.sweep`` builds them (False: one launch per tap)."""
    from autodiff.gather import seed_exact, split_gather
    from autodiff.report import Accumulation
    from autodiff.tapes import runtime_tapes
    from polypy.driver.pipelines import after_ad_pipeline
    from polypy.passes import run_pipeline

    def build(inputs: tuple[str, ...], decisions: list | None) -> n.Kernel:
        return grad_kernel(module, name, wrt=wrt, const=const, report=decisions, gather_inputs=inputs, **options)

    if options.get("mode", "reverse") != "reverse" or not options.get("privacy", True):
        return (), build((), report)
    if not any(k.name == name for k in module.kernels):
        return (), build((), report)  # grad_kernel's refusal, located
    try:
        kernel, active, candidates, oracle = _candidates(module, name, wrt, const, options.get("optimize", True),
                                                         privacy_oracle)
    except UserError:  # (an unknown wrt name, ...): grad_kernel refuses it, or differentiates without taps
        candidates = ()
    if not candidates:
        return (), build((), report)
    written = buffers_written(kernel)
    seeds = {p: seed_exact(kernel, p, _answer(oracle(p))) for p in active.pointers if p in written}
    simplify = lambda k: run_pipeline(k, after_ad_pipeline())  # noqa: E731
    private = lambda k, buffer: _answer(privacy_oracle(k)(buffer))  # noqa: E731
    inputs = candidates
    kept: dict[str, str] = {}
    for _ in range(3):  # a refused input changes the others' kernel: split again without it
        decisions: list = []
        grad = build(inputs, decisions)
        if runtime_tapes(grad):
            kept.update({a: "the gradient has tapes sized at launch" for a in inputs})
            inputs = ()
            break
        shadow_of = _shadows(grad, active.pointers)
        split = split_gather(grad, inputs, shadow_of, seeds, private, simplify, sweep_taps=sweep)
        kept.update(split.kept)
        if not split.kept:
            break
        inputs = tuple(a for a in inputs if a in split.gathered)
        if not inputs:
            break
    else:  # pragma: no cover - the refusals shrink the set each time
        inputs = ()
    if not inputs:
        decisions = []
        result = build((), decisions if report is not None else None)
        if report is not None:
            report.extend(_with_reasons(decisions, kept))
        return (), result
    if report is not None:
        for d in decisions:
            if isinstance(d, Accumulation) and d.buffer in split.swept:
                d = dataclasses.replace(d, strategy="gather", reason=split.swept[d.buffer])
            elif isinstance(d, Accumulation) and d.buffer in split.gathered:
                why = split.unswept.get(d.buffer)
                d = dataclasses.replace(d, strategy="gather", reason=_GATHER_REASON + (
                    f" (tap launches, no single sweep: {why})" if why else ""))
            report.append(d)
        report[:] = _with_reasons(report, kept)
    return tuple(_pruned(t) for t in split.taps), split.rest


_GATHER_REASON = ("a launch of its own before the rest of the gradient (on the CPU, polypy runs K_grad as "
                  "launches in sequence): isl proves the load's read relation injective on the domain where it "
                  "runs, so each element of the shadow is added to by one thread, with a plain +=; no atomics")


def _answer(got: tuple) -> tuple[bool, n.Expr | None]:
    """The privacy oracle's answer as ``autodiff.gather.Private`` takes it."""
    return bool(got[0]), (got[2] if len(got) > 2 else None)


def _with_reasons(decisions: list, kept: dict[str, str]) -> list:
    from autodiff.report import Accumulation

    out = []
    for d in decisions:
        if isinstance(d, Accumulation) and d.buffer in kept:
            d = dataclasses.replace(d, reason=f"{d.reason}; no gather form: {kept[d.buffer]}")
        out.append(d)
    return out


def _shadows(grad: n.Kernel, pointers: tuple[str, ...]) -> dict[str, str]:
    """Each active pointer's shadow: the parameter after it (DESIGN.md's calling convention)."""
    params = [p.name for p in grad.params]
    return {p: params[params.index(p) + 1] for p in pointers}


def _pruned(kernel: n.Kernel) -> n.Kernel:
    """``kernel`` without the buffers it no longer names (a tap needs none of the windows)."""
    used = {x.buffer for x in walk(kernel) if isinstance(x, (n.Load, n.Store, n.AtomicRMW))}
    return dataclasses.replace(kernel, buffers=tuple(b for b in kernel.buffers if b.name in used))


@dataclasses.dataclass(frozen=True)
class GatherNote:
    """A line of ``polypy grad --report``: what the CPU path does with one read-only input."""
    buffer: str
    text: str

    def format(self) -> str:
        return self.text


def gather_notes(module: n.Module, name: str, grad_kernel: Callable, privacy_oracle: Callable,
                 **options: Any) -> list[GatherNote]:
    """What the CPU path (``polypy.grad``) does with each read-only input, for ``polypy grad
    --report`` (whose output keeps one kernel)."""
    report: list = []
    try:
        gather_gradient(module, name, grad_kernel, privacy_oracle, report=report, **options)
    except UserError:
        return []
    from autodiff.report import Accumulation

    seen: dict[str, str] = {}
    for d in report:
        if isinstance(d, Accumulation) and d.buffer not in seen and (d.strategy == "gather" or "no gather form" in d.reason):
            seen[d.buffer] = ("gather form (single sweep, plain +=)" if d.strategy == "gather" and "single sweep (" in d.reason
                              else "gather form (tap launches, plain +=)" if d.strategy == "gather"
                              else "no gather form: " + d.reason.split("no gather form: ", 1)[1])
    return [GatherNote(b, f"input {b}: when polypy runs the gradient on the CPU (polypy.grad, polypy.torch): "
                          f"{why}; this output keeps one kernel K_grad with the forms above") for b, why in seen.items()]


class PhasedGradient:
    """``K_grad`` run as tap launches and then the rest, each with the kernel's launch (the
    interface of ``polypy.driver.gradients._GradientKernel``)."""

    def __init__(self, taps: tuple[Any, ...], rest: Any):
        self.taps, self.rest = taps, rest
        self.name = rest.name
        self._machine: dict[tuple, Any] = {}  # (tap, launch facts) -> the machine code it runs

    def __getitem__(self, config: Any):
        taps = [t[config] for t in self.taps]
        rest = self.rest[config]

        def launch(*args: Any, **kwargs: Any) -> None:
            # every launch's arguments checked before any runs: a refused launch changes nothing
            runs = [self._prepare_tap(i, one, args, kwargs) for i, one in enumerate(taps)]
            if hasattr(rest, "bind"):
                arrays, _, ints = rest.bind(args, kwargs)
                rest.kernel._proof(rest.grid, rest.block, ints).check(rest, arrays)
            for run in runs:
                run()
            rest(*args, **kwargs)
        return launch

    def _prepare_tap(self, i: int, launch: Any, args: tuple, kwargs: dict) -> Callable[[], None]:
        """``launch(*args, **kwargs)`` to run, after the checks of every launch (arguments,
        footprints in bounds), with the choice of machine code remembered per launch shape,
        integer arguments, unproven arrays and overlapping pairs: a tap is short, and choosing
        costs about as much. The integer arguments select as for any launch (the version for
        unit last strides of accessors where they are 1)."""
        import numpy as np

        from polypy.driver.api import _EmptyLaunch

        k = launch.kernel
        if isinstance(launch, _EmptyLaunch) or k._unbound:
            launch.bind(args, kwargs)
            return lambda: launch(*args, **kwargs)
        arrays, scalars, ints = launch.bind(args, kwargs)
        unproven = k._proof(launch.grid, launch.block, ints).check(launch, arrays)
        values = list(arrays.values())
        overlaps = tuple(np.may_share_memory(x, y) for j, x in enumerate(values) for y in values[j + 1:])
        key = (i, launch.grid, launch.block, tuple(sorted(ints.items())), unproven, tuple(arrays), overlaps)
        compiled = self._machine.get(key)
        if compiled is None:
            compiled = self._machine[key] = k.for_launch(launch.grid, launch.block, arrays, unproven, ints)
        return lambda: compiled.run(launch.grid, launch.block, launch.shmem, arrays, scalars,
                                    threads=k.module.threads)

    @property
    def emulate(self):
        outer = self

        class _Emulated:
            def __getitem__(self, config: Any):
                launches = [t.emulate[config] for t in outer.taps] + [outer.rest.emulate[config]]

                def launch(*args: Any, **kwargs: Any) -> None:
                    for one in launches:
                        one(*args, **kwargs)
                return launch

        return _Emulated()

    @property
    def gpu(self) -> n.Kernel:
        return self.rest.gpu

    @property
    def signature(self) -> n.Kernel:
        """``K_grad``'s parameters (every launch takes them all)."""
        return self.rest.compiled.signature

    def memory(self, config: Any, *args: Any, **kwargs: Any) -> dict[str, int]:
        return self.rest.memory(config, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<polypy gradient kernel {self.name} ({len(self.taps)} tap launches first)>"
