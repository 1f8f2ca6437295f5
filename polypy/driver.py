"""The driver: the one place that wires the stages together.

``frontend`` → GPU-form passes → (``gpu2cpu`` → ``codegen``) or (``autodiff``). Stage packages
are imported inside the functions that use them, so importing ``polypy`` stays cheap and the
stages never depend on one another.
"""
from __future__ import annotations

import dataclasses
import os

from polypy.ir import nodes as n
from polypy.passes import SIMPLIFY, Pass, run_pipeline
from polypy.passes.eliminate_returns import eliminate_returns

# What every kernel goes through right after the frontend (GPU form in, GPU form out).
GPU_PIPELINE: tuple[Pass, ...] = (Pass("eliminate-returns", eliminate_returns),) + SIMPLIFY


def parse(path: str | os.PathLike, *, defines: dict[str, str] | None = None,
          include_dirs: tuple[str, ...] = (), text: str | None = None) -> n.Module:
    """The frontend alone: GPU-form IR exactly as the source says."""
    from frontend import parse_file

    return parse_file(os.fspath(path), text=text, defines=defines, include_dirs=tuple(include_dirs))


def load(path: str | os.PathLike, *, defines: dict[str, str] | None = None,
         include_dirs: tuple[str, ...] = (), text: str | None = None,
         timings: dict[str, float] | None = None) -> n.Module:
    """Parse and simplify: the GPU-form module every other stage starts from."""
    module = parse(path, defines=defines, include_dirs=include_dirs, text=text)
    return optimize_module(module, GPU_PIPELINE, timings=timings)


def optimize_module(module: n.Module, passes, *, timings: dict[str, float] | None = None) -> n.Module:
    kernels = tuple(run_pipeline(k, passes, timings=timings) for k in module.kernels)
    return dataclasses.replace(module, kernels=kernels)


def cpu_pipeline(*, optimize: bool = True, recompute: bool = True, report: list | None = None) -> tuple[Pass, ...]:
    """GPU form -> CPU form: the passes ``to_cpu`` runs, in order.

    ``optimize``: barrier elimination and shared-memory forwarding first (GPU form, exact with
    isl), and after the lowering the CPU schedule (fuse, tighten, sink, tighten: see
    ``gpu2cpu``); ``recompute``: recompute cheap values that cross thread loops instead of
    storing them; ``report`` receives every pass's decisions (objects with ``format()``), in order.
    """
    import functools

    from gpu2cpu.barriers import eliminate_barriers
    from gpu2cpu.forward_shared import eliminate_dead_shared_stores, forward_shared_stores
    from gpu2cpu.fuse_thread_loops import fuse_thread_loops
    from gpu2cpu.lower_block_atomics import lower_block_atomics
    from gpu2cpu.serialize_threads import serialize_threads
    from gpu2cpu.sink_thread_loops import sink_thread_loops
    from gpu2cpu.tighten_thread_bounds import tighten_thread_bounds
    from polypy.passes import eliminate_dead_code, fold_constants

    before: tuple[Pass, ...] = ()
    schedule: tuple[Pass, ...] = ()
    if optimize:
        before = (
            Pass("forward-shared-stores", forward_shared_stores),
            Pass("eliminate-dead-shared-stores", eliminate_dead_shared_stores),
            Pass("eliminate-barriers", functools.partial(eliminate_barriers, report=report)),
        )
        schedule = (
            Pass("fuse-thread-loops", functools.partial(fuse_thread_loops, report=report)),
            Pass("tighten-thread-bounds", functools.partial(tighten_thread_bounds, report=report)),
            Pass("eliminate-dead-code", eliminate_dead_code),  # what the ranges without a guard leave dead
            Pass("sink-thread-loops", functools.partial(sink_thread_loops, report=report)),
            Pass("tighten-thread-bounds", functools.partial(tighten_thread_bounds, report=report)),
        )
    return before + (
        Pass("serialize-threads", functools.partial(serialize_threads, recompute=recompute, report=report)),
    ) + schedule + (
        Pass("lower-block-atomics", lower_block_atomics),
        Pass("fold-constants", fold_constants),
        Pass("eliminate-dead-code", eliminate_dead_code),
    )


def to_cpu(kernel: n.Kernel, *, optimize: bool = True, recompute: bool = True, report: list | None = None,
           timings: dict[str, float] | None = None) -> n.Kernel:
    """A GPU-form kernel (from ``load``) in CPU form: the work of one block, threads as loops."""
    return run_pipeline(kernel, cpu_pipeline(optimize=optimize, recompute=recompute, report=report), timings=timings)
