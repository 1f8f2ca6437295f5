"""The driver: the one place that wires the stages together.

``frontend`` → GPU-form passes → (``gpu2cpu`` → ``codegen``) or (``autodiff``). Stage packages
are imported inside the functions that use them, so importing ``polypy`` stays cheap and the
stages never depend on one another.
"""
from __future__ import annotations

import dataclasses
import functools
import os

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.passes import SIMPLIFY, Pass, run_pipeline
from polypy.passes.eliminate_returns import eliminate_returns

# What every kernel goes through right after the frontend (GPU form in, GPU form out).
GPU_PIPELINE: tuple[Pass, ...] = (Pass("eliminate-returns", eliminate_returns),) + SIMPLIFY


# The file name diagnostics give source text that comes without a path (``compile(None, text=...)``).
TEXT_NAME = "<string>"


def source_path(path: str | os.PathLike | None, text: str | None) -> str:
    """The name the frontend parses under: ``path``, which must exist unless ``text`` is given,
    or ``TEXT_NAME`` for text alone."""
    if path is None:
        if text is None:
            raise UserError("nothing to parse: give a source file or the source text (text=...)")
        return TEXT_NAME
    if not isinstance(path, (str, os.PathLike)):
        raise UserError(f"the source file must be a path (str or os.PathLike), got {type(path).__name__}")
    name = os.fspath(path)
    if text is None:
        if os.path.isdir(name):
            raise UserError(f"{name} is a directory, not a source file")
        if not os.path.exists(name):
            raise UserError(f"no such file: {name}")
    return name


def parse(path: str | os.PathLike | None, *, defines: dict[str, str] | None = None,
          include_dirs: tuple[str, ...] = (), text: str | None = None) -> n.Module:
    """The frontend alone: GPU-form IR exactly as the source says. Without ``path``, ``text`` is
    parsed as CUDA under the name ``<string>``."""
    from frontend import parse_file

    return parse_file(source_path(path, text), text=text, defines=defines, include_dirs=tuple(include_dirs))


def load(path: str | os.PathLike | None, *, defines: dict[str, str] | None = None,
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


def coarsen_for_block(kernel: n.Kernel, *, block: tuple[int, int, int], fine: n.Kernel | None = None,
                      factor: int | None = None, optimize: bool = True,
                      report: list | None = None) -> n.Kernel | None:
    """The block function of *coarse blocks* for launches of ``kernel`` (GPU form, from ``load``)
    with block shape ``block``, or None where coarsening is not legal or not worth it.

    ``gpu2cpu.coarsen_blocks``: ``factor`` consecutive blocks along x run as one block (chosen by
    ``plan_coarsening`` unless given), lowered with ``to_cpu`` and specialized for the coarse
    shape, then joined with ``fine`` -- the kernel's own block function specialized for
    ``block`` (made here when not given) -- which runs the blocks of a partial coarse block.
    The result is CPU form, specialized, with ``Kernel.coarsen == (factor, 1, 1)``.
    ``report`` receives the decision (``gpu2cpu.coarsen_blocks.Coarsening``).
    """
    from gpu2cpu.coarsen_blocks import coarsen_blocks, join_partial_blocks, plan_coarsening
    from polypy.ir.verifier import verify_kernel
    from polypy.passes.specialize import check_block_shape, specialize_block_shape

    block = check_block_shape(block)
    plan = plan_coarsening(kernel, block=block, factor=factor)
    if report is not None:
        report.append(plan)
    if plan.factor == 1:
        return None
    rewrite = (Pass("coarsen-blocks", functools.partial(coarsen_blocks, block=block, factor=plan.factor)),)
    coarse_gpu = run_pipeline(kernel, rewrite + SIMPLIFY)
    coarse = specialize_block_shape(to_cpu(coarse_gpu, optimize=optimize),
                                    block=(plan.factor * block[0], block[1], block[2]))
    if fine is None:
        fine = specialize_block_shape(to_cpu(kernel, optimize=optimize), block=block)
    joined = join_partial_blocks(coarse, fine, factor=plan.factor)
    verify_kernel(joined)
    return joined


def block_coarsener(module: n.Module, *, factor: int | None = None, optimize: bool = True):
    """For ``codegen.c`` (``build_library(..., coarsen=...)``, ``emit_kernels``): a function that
    gives, per kernel and block shape, its version for coarse blocks (``polypy.coarsening.
    CoarseVersion``) made from ``module``'s GPU form with ``coarsen_for_block``, or None.

    ``factor`` forces that factor wherever it is legal, and the version then runs on every launch
    (for testing); None: the model chooses and launches with too few coarse blocks run the kernel
    as it is.
    """
    from polypy.coarsening import BLOCKS_PER_WORKER, CoarseVersion

    def coarsen(kernel: n.Kernel, block: tuple[int, int, int], fine: n.Kernel) -> CoarseVersion | None:
        try:
            gpu = module.kernel(kernel.name)
        except KeyError:
            return None
        coarse = coarsen_for_block(gpu, block=block, fine=fine, factor=factor, optimize=optimize)
        if coarse is None:
            return None
        return CoarseVersion(coarse, 0 if factor is not None else BLOCKS_PER_WORKER)

    return coarsen
