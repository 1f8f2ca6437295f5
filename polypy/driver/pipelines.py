"""The named passes and the pipelines built from them: the one place pass lists live.

Every pass the driver runs is registered here under a kebab-case name (``serialize-threads``),
with the function that implements it (``"gpu2cpu.serialize_threads:serialize_threads"``, imported
on first use, so registering costs nothing and the stages stay unimported until a pipeline
runs). A pass's *options* are the keyword-only parameters of its function (``recompute``,
``report``, ...). The pipelines are visible lists of names::

    GPU_PASSES      frontend output -> simplified GPU form            (``load``)
    CPU_OPTIMIZE    GPU form, exact with isl, before the lowering     (``to_cpu``, optimize=True)
    CPU_LOWERING    GPU form -> CPU form
    CPU_SCHEDULE    the CPU schedule after the lowering               (optimize=True)
    CPU_FINISH      what every CPU-form kernel goes through last
    BEFORE_AD       before differentiation                             (``polypy.driver.gradients``)
    AFTER_AD        after differentiation

``make_pass(name, **options)`` gives a ``polypy.passes.Pass`` ready for ``run_pipeline``;
``parse_pipeline("a+b{recompute=false}")`` a list of them (the golden tests' sections);
``check_pass_name`` validates ``--dump-after NAME``. ``lower_and_emit`` is the one "GPU form ->
CPU form -> code" path the commands, the gradients, the programs, the API and the benchmarks use.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import os
import re
from typing import Any, Callable, Sequence

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.passes import SIMPLIFY as _SIMPLIFY
from polypy.passes import Pass, run_pipeline


@dataclasses.dataclass(frozen=True)
class RegisteredPass:
    """A named pass: ``target`` is ``"package.module:function"``, imported when first used."""

    name: str
    target: str
    doc: str = ""

    @functools.cached_property
    def function(self) -> Callable[..., n.Kernel]:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    @property
    def options(self) -> tuple[str, ...]:
        """The keyword-only parameters of the pass function."""
        params = inspect.signature(self.function).parameters.values()
        return tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)


PASSES: dict[str, RegisteredPass] = {}
_KEBAB = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def register_pass(name: str, target: str, *, doc: str = "") -> RegisteredPass:
    """Register ``target`` (``"module:function"``, a pure ``Kernel -> Kernel`` function whose
    options are keyword-only) under the kebab-case ``name``."""
    if not _KEBAB.fullmatch(name):
        raise ValueError(f"pass names are kebab-case: {name!r}")
    if name in PASSES and PASSES[name].target != target:
        raise ValueError(f"pass {name!r} is already registered for {PASSES[name].target}")
    entry = RegisteredPass(name, target, doc)
    PASSES[name] = entry
    return entry


def pass_names() -> tuple[str, ...]:
    return tuple(sorted(PASSES))


def check_pass_name(name: str) -> str:
    """``name`` if a pass is registered under it, else a ``UserError`` listing the names."""
    if name not in PASSES:
        raise UserError(f"unknown pass '{name}' (passes: {', '.join(pass_names())})")
    return name


def make_pass(name: str, *, report: list | None = None, **options: Any) -> Pass:
    """The registered pass ``name`` with ``options`` bound; ``report`` goes to the passes that
    take one and is ignored by the others."""
    entry = PASSES[check_pass_name(name)]
    takes = entry.options
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise UserError(f"pass '{name}' has no option {', '.join(unknown)} (options: {', '.join(takes) or 'none'})")
    if report is not None and "report" in takes:
        options["report"] = report
    run = functools.partial(entry.function, **options) if options else entry.function
    return Pass(name, run)


def passes(names, *, report: list | None = None) -> tuple[Pass, ...]:
    """``make_pass`` for each name of ``names`` (no options)."""
    return tuple(make_pass(name, report=report) for name in names)


_OPTION_VALUES = {"true": True, "false": False, "none": None}


def parse_pipeline(spec: str, *, report: list | None = None) -> tuple[Pass, ...]:
    """Passes from text: names joined by ``+``, each with optional ``{option=value,...}``
    (``true``/``false``/``none``/integers), e.g. ``serialize-threads{recompute=false}+fold-constants``."""
    out = []
    for item in spec.split("+"):
        item = item.strip()
        name, brace, rest = item.partition("{")
        options: dict[str, Any] = {}
        if brace:
            if not rest.endswith("}"):
                raise UserError(f"bad pass options in '{item}': expected name{{option=value,...}}")
            for pair in filter(None, (p.strip() for p in rest[:-1].split(","))):
                key, eq, value = pair.partition("=")
                if not eq:
                    raise UserError(f"bad pass option '{pair}' in '{item}': expected option=value")
                value = value.strip()
                options[key.strip()] = _OPTION_VALUES[value] if value in _OPTION_VALUES else int(value)
        out.append(make_pass(name.strip(), report=report, **options))
    return tuple(out)


# ---- the registry ----------------------------------------------------------------------------
for _name, _target in (
    # polypy/passes: target independent
    ("eliminate-returns", "polypy.passes.eliminate_returns:eliminate_returns"),
    # run by the frontend on each kernel, before its barrier check (frontend/module.py)
    ("guard-early-returns", "polypy.passes.guard_early_returns:guard_early_returns"),
    ("raise-counted-loops", "polypy.passes.raise_counted_loops:raise_counted_loops"),
    ("fold-constants", "polypy.passes.fold_constants:fold_constants"),
    ("forward-scalars", "polypy.passes.forward_scalars:forward_scalars"),
    ("eliminate-dead-code", "polypy.passes.eliminate_dead_code:eliminate_dead_code"),
    ("hoist-invariants", "polypy.passes.hoist_invariants:hoist_invariants"),
    ("substitute-inductions", "polypy.passes.substitute_inductions:substitute_inductions"),
    ("specialize-block-shape", "polypy.passes.specialize:specialize_block_shape"),
    ("specialize-partial-coarse", "polypy.passes.specialize:specialize_partial_coarse"),
    ("specialize-unit-strides", "polypy.passes.unit_strides:specialize_unit_strides"),
    # the steps of specialize-block-shape's clean-up (polypy.passes.specialize.SPECIALIZE_CLEANUP)
    ("unit-thread-loops", "polypy.passes.specialize:unit_thread_loops"),
    ("unroll-block-loops", "polypy.passes.specialize:unroll_block_loops"),
    ("propagate-block-constants", "polypy.passes.specialize:propagate_block_constants"),
    ("stride-guarded-threads", "polypy.passes.specialize:stride_guarded_threads"),
    ("jam-threads", "polypy.passes.jam_threads:jam_thread_loops"),
    ("hoist-faults", "polypy.passes.hoist_faults:hoist_faults"),
    # a kernel's versions (KernelVersions -> KernelVersions, polypy.passes.versions.build_versions)
    ("version-block-shapes", "polypy.passes.versions:version_block_shapes"),
    ("version-coarse-blocks", "polypy.passes.versions:version_coarse_blocks"),
    ("version-arrays-apart", "polypy.passes.versions:version_arrays_apart"),
    ("version-without-default", "polypy.passes.versions:version_without_default"),
    ("version-grid-bounds", "polypy.passes.versions:version_grid_bounds"),
    ("version-unit-strides", "polypy.passes.versions:version_unit_strides"),
    ("version-bounds-checks", "polypy.passes.versions:version_bounds_checks"),
    # gpu2cpu: GPU form, exact with isl
    ("forward-shared-stores", "gpu2cpu.forward_shared:forward_shared_stores"),
    ("eliminate-dead-shared-stores", "gpu2cpu.forward_shared:eliminate_dead_shared_stores"),
    ("eliminate-barriers", "gpu2cpu.barriers:eliminate_barriers"),
    ("uniform-warp-loops", "gpu2cpu.uniform_warp_loops:uniform_warp_loops"),
    ("lower-warp-syncs", "gpu2cpu.lower_warp_syncs:lower_warp_syncs"),
    ("lockstep-warps", "gpu2cpu.lockstep_warps:lockstep_warps"),
    ("refuse-warp-synchronous", "gpu2cpu.refuse_warp_synchronous:refuse_warp_synchronous"),
    ("refuse-spin-waits", "gpu2cpu.refuse_spin_waits:refuse_spin_waits"),
    ("coarsen-blocks", "gpu2cpu.coarsen_blocks:coarsen_blocks"),
    # gpu2cpu: GPU form -> CPU form, and the CPU schedule
    ("collapse-identical-threads", "gpu2cpu.collapse_identical_threads:collapse_identical_threads"),
    ("serialize-threads", "gpu2cpu.serialize_threads:serialize_threads"),
    ("fuse-thread-loops", "gpu2cpu.fuse_thread_loops:fuse_thread_loops"),
    ("tighten-thread-bounds", "gpu2cpu.tighten_thread_bounds:tighten_thread_bounds"),
    ("sink-thread-loops", "gpu2cpu.sink_thread_loops:sink_thread_loops"),
    ("split-dynamic-shared", "gpu2cpu.split_dynamic_shared:split_dynamic_shared"),
    # gpu2cpu: steps of the schedule passes, as passes of their own (fission and versioning are
    # steps of tighten-thread-bounds, grid-stride normalization a step of sink-thread-loops)
    ("distribute-thread-loops", "gpu2cpu.distribute_thread_loops:distribute_thread_loops"),
    ("version-thread-loops", "gpu2cpu.version_thread_loops:version_thread_loops"),
    ("normalize-grid-stride", "gpu2cpu.normalize_grid_stride:normalize_grid_stride"),
    ("lower-block-atomics", "gpu2cpu.lower_block_atomics:lower_block_atomics"),
    ("promote-accumulators", "gpu2cpu.promote_accumulators:promote_accumulators"),
    ("sum-uniform-atomics", "gpu2cpu.sum_uniform_atomics:sum_uniform_atomics"),
    ("split-scatter-adds", "gpu2cpu.split_scatter_adds:split_scatter_adds"),
    ("split-quotient-runs", "gpu2cpu.split_quotient_runs:split_quotient_runs"),
    ("divide-in-double", "gpu2cpu.divide_in_double:divide_in_double"),
    ("prefetch-grid-stride", "gpu2cpu.prefetch_grid_stride:prefetch_grid_stride"),
    ("privatize-atomics", "gpu2cpu.privatize_atomics:privatize_atomics"),
    ("localize-uniform-loads", "gpu2cpu.localize_uniform_loads:localize_uniform_loads"),
):
    register_pass(_name, _target)

# ---- the pipelines (lists of names) ----------------------------------------------------------
# ``polypy.passes.SIMPLIFY`` (the ground floor's list, which autodiff runs too), by name.
SIMPLIFY: tuple[str, ...] = tuple(p.name for p in _SIMPLIFY)
# __syncwarp becomes block barriers between guarded phases right away (gpu2cpu.lower_warp_syncs):
# every later pass, the emulator and the gradients meet barriers they know.
# Before it, loops whose trips differ between threads with warp operations inside run the block's
# largest trip count, guarded (gpu2cpu.uniform_warp_loops): their warp operations are then branches.
GPU_PASSES: tuple[str, ...] = ("eliminate-returns", "uniform-warp-loops", "lower-warp-syncs",
                               "raise-counted-loops") + SIMPLIFY
# Forwarding first: it makes stores dead and then barriers removable.
SHARED_OPTIMIZE: tuple[str, ...] = ("forward-shared-stores", "eliminate-dead-shared-stores", "eliminate-barriers")
# What the CPU schedule would run with another meaning comes first, optimized or not: races
# inside one warp (implicit warp-synchronous code) get their lockstep order as barriers where
# that is exact, and are refused where not; loops only another thread's store can end (they
# need threads that really run at once) are refused.
CPU_CHECK: tuple[str, ...] = ("lockstep-warps", "refuse-warp-synchronous", "refuse-spin-waits")
# Then locals a loop steps by a fixed amount as functions of its counter: not carried through the
# loop, they need no per-thread buffer once the threads are loops.
CPU_OPTIMIZE: tuple[str, ...] = SHARED_OPTIMIZE + ("substitute-inductions",)
# Identical threads (an unread threadIdx dimension) run once, before the threads become loops.
# A block-uniform misaligned-address check first: it is then tested once per block.
CPU_LOWERING: tuple[str, ...] = ("hoist-faults", "collapse-identical-threads", "serialize-threads")
CPU_SCHEDULE: tuple[str, ...] = (
    "split-dynamic-shared",  # interleaved extern shared records (a gradient's shadow): unit stride
    "fuse-thread-loops",
    "tighten-thread-bounds",
    "eliminate-dead-code",  # what the ranges without a guard leave dead
    "sink-thread-loops",
    "tighten-thread-bounds",
    "promote-accumulators",  # elements updated in serial loops kept in registers
    "sum-uniform-atomics",  # every thread's atomic add to one element: a sum in a register
    "split-scatter-adds",  # a histogram's adds at loaded indices: spread over copies of its bins
    "split-quotient-runs",  # (B + tx) / n, % n: the threads of one quotient at a time (no gathers)
    "divide-in-double",  # x / n, x % n in thread loops: exact in f64, which vectorizes
    "prefetch-grid-stride",  # a block's next stretches of a grid-stride loop, ahead of time
    "localize-uniform-loads",  # a filter's coefficients every thread reads: copied once per thread loop
)
# privatize-atomics last: it marks buffers by their accesses, which no later pass may change.
CPU_FINISH: tuple[str, ...] = ("lower-block-atomics", "fold-constants", "eliminate-dead-code", "privatize-atomics")
BEFORE_AD: tuple[str, ...] = SHARED_OPTIMIZE + ("hoist-invariants",) + SIMPLIFY
# After differentiation: fold and clean up, but keep the generated locals (trip counts, iteration
# indices, reconstructed loop variables) named rather than forwarded into every use.
AFTER_AD: tuple[str, ...] = ("fold-constants", "eliminate-dead-code")

# What every kernel goes through right after the frontend (GPU form in, GPU form out).
GPU_PIPELINE: tuple[Pass, ...] = passes(GPU_PASSES)


def cpu_pipeline(*, optimize: bool = True, recompute: bool = True, report: list | None = None,
                 wide: bool = False, program: bool = False) -> tuple[Pass, ...]:
    """GPU form -> CPU form: the passes ``to_cpu`` runs, in order.

    ``optimize``: ``CPU_OPTIMIZE`` first (barrier elimination and shared-memory forwarding, GPU
    form, exact with isl) and ``CPU_SCHEDULE`` after the lowering (see ``gpu2cpu``);
    ``recompute``: recompute cheap values that cross thread loops instead of storing them;
    ``report`` receives every pass's decisions (objects with ``format()``), in order;
    ``wide``: the kernel runs in wide (coarse) blocks: ``tighten-thread-bounds`` decides
    conditions on ranges of the threads too (its ``ranges`` option);
    ``program``: the kernel is part of a whole program, whose created streams run alongside the
    host: ``refuse-spin-waits`` accepts a loop only the host can end (its ``program`` option).
    """
    before = tuple(make_pass(name, report=report, **({"program": True} if program and name == "refuse-spin-waits"
                                                      else {}))
                   for name in CPU_CHECK + (CPU_OPTIMIZE if optimize else ()))
    lowering = tuple(make_pass(name, report=report, **({"recompute": recompute} if name == "serialize-threads" else {}))
                     for name in CPU_LOWERING)
    schedule = tuple(make_pass(name, report=report, **({"ranges": True} if wide and name == "tighten-thread-bounds"
                                                       else {}))
                     for name in CPU_SCHEDULE) if optimize else ()
    return before + lowering + schedule + passes(CPU_FINISH, report=report)


def before_ad_pipeline(*, optimize: bool = True) -> tuple[Pass, ...]:
    """What runs on a kernel before it is differentiated (nothing without ``optimize``)."""
    if not optimize:
        return passes(CPU_CHECK)
    return passes(CPU_CHECK) + tuple(make_pass(name, **({"assume_noalias": True} if name == "hoist-invariants" else {}))
                                     for name in BEFORE_AD)


def after_ad_pipeline() -> tuple[Pass, ...]:
    return passes(AFTER_AD)


def optimize_module(module: n.Module, pipeline, *, timings: dict[str, float] | None = None) -> n.Module:
    kernels = tuple(run_pipeline(k, pipeline, timings=timings) for k in module.kernels)
    return dataclasses.replace(module, kernels=kernels)


def to_cpu(kernel: n.Kernel, *, optimize: bool = True, recompute: bool = True, report: list | None = None,
           timings: dict[str, float] | None = None, wide: bool = False, program: bool = False) -> n.Kernel:
    """A GPU-form kernel (from ``load``) in CPU form: the work of one block, threads as loops
    (``wide``: for wide blocks, see ``cpu_pipeline``)."""
    return run_pipeline(kernel, cpu_pipeline(optimize=optimize, recompute=recompute, report=report, wide=wide,
                                             program=program), timings=timings)


# ---- block coarsening (polypy.driver.coarsen re-exports these) ------------------------------------


def coarsen_for_block(kernel: n.Kernel, *, block: tuple[int, int, int], factor: int | None = None,
                      optimize: bool = True, report: list | None = None) -> n.Kernel | None:
    """The block function of *coarse blocks* for launches of ``kernel`` (GPU form, from ``load``)
    with block shape ``block``, or None where coarsening is not legal or not worth it.

    ``gpu2cpu.coarsen_blocks``: ``factor`` consecutive blocks along x run as one block (chosen by
    ``plan_coarsening`` unless given; planned again with runs of at most ``SCRATCH_RUN``
    threads where the lowered coarse block keeps per-thread values in memory), lowered with
    ``to_cpu``, specialized for the coarse shape and, for the last coarse block of a row where
    fewer blocks are left, for as many blocks as are left (``specialize_partial_coarse``), the two
    joined. The result is CPU form, specialized, with ``Kernel.coarsen == (factor, 1, 1)``. ``report`` receives the decision
    (``gpu2cpu.coarsen_blocks.Coarsening``).
    """
    from gpu2cpu.coarsen_blocks import SCRATCH_RUN, join_partial_blocks, plan_coarsening
    from polypy.ir.verifier import verify_kernel
    from polypy.launch import check_block_shape
    from polypy.passes.specialize import specialize_for_block
    from gpu2cpu.tighten_thread_bounds import RANGE_MIN_THREADS

    block = check_block_shape(block)

    def lowered(plan):
        rewrite = (make_pass("coarsen-blocks", block=block, factor=plan.factor),) + passes(SIMPLIFY)
        # Coarse blocks of at least RANGE_MIN_THREADS along x decide conditions on ranges of threads.
        wide = plan.factor * block[0] >= RANGE_MIN_THREADS
        return to_cpu(run_pipeline(kernel, rewrite), optimize=optimize, wide=wide)

    plan = plan_coarsening(kernel, block=block, factor=factor)
    coarse_cpu = lowered(plan) if plan.factor > 1 else None
    if (factor is None and coarse_cpu is not None and plan.factor * block[0] > SCRATCH_RUN
            and any(b.space == "local" for b in coarse_cpu.buffers)):
        # Per-thread values kept in memory: one element per thread of the coarse block each.
        plan = plan_coarsening(kernel, block=block, max_run=SCRATCH_RUN)
        coarse_cpu = lowered(plan) if plan.factor > 1 else None
    if report is not None:
        report.append(plan)
    if coarse_cpu is None:
        return None
    coarse = specialize_for_block(coarse_cpu, (plan.factor * block[0], block[1], block[2]))
    partial = run_pipeline(coarse_cpu, (make_pass("specialize-partial-coarse", block=block, factor=plan.factor),))
    joined = join_partial_blocks(coarse, partial, factor=plan.factor)
    verify_kernel(joined)
    return joined


def block_coarsener(module: n.Module, *, factor: int | None = None, optimize: bool = True,
                    decisions: dict | None = None):
    """For ``codegen.c`` (``build_library(..., coarsen=...)``, ``emit_kernels``, ``emit_program``):
    a function that gives, per kernel and block shape, its version for coarse blocks
    (``polypy.coarsening.CoarseVersion``) made from ``module``'s GPU form with
    ``coarsen_for_block``, or None.

    ``factor`` forces that factor wherever it is legal, and the version then runs on every launch
    (for testing); None: the model chooses and launches with too few coarse blocks run the kernel
    as it is. ``decisions`` receives, per ``(kernel name, block shape)``, the decision
    (``gpu2cpu.coarsen_blocks.Coarsening``: factor and why), for the per-launch report.
    """
    from polypy.coarsening import BLOCKS_PER_WORKER, CoarseVersion

    def coarsen(kernel: n.Kernel, block: tuple[int, int, int], fine: n.Kernel) -> CoarseVersion | None:
        if kernel.host_polls:  # waits for the host (gpu2cpu/refuse_spin_waits.py): nothing to gain
            return None
        try:
            gpu = module.kernel(kernel.name)
        except KeyError:
            return None
        plans: list = []
        coarse = coarsen_for_block(gpu, block=block, factor=factor, optimize=optimize, report=plans)
        if decisions is not None and plans:
            decisions[(kernel.name, tuple(block))] = plans[-1]
        if coarse is None:
            return None
        return CoarseVersion(coarse, 0 if factor is not None else BLOCKS_PER_WORKER)

    return coarsen


TARGETS = ("cpu", "cpu-ir", "llvm", "c", "cpp")


def launch_versions(host, shapes: dict, plans: dict) -> list:
    """Per launch site of the whole program ``host``, the version of its kernel it runs and why
    (``polypy.coarsening.LaunchVersion``): ``shapes`` are the block shapes each kernel has
    specialized versions for (``polypy.passes.versions.program_block_shapes``), ``plans`` the coarsening
    decision per (kernel, shape) (``polypy.driver.coarsen.block_coarsener``)."""
    from polypy.coarsening import LaunchVersion
    from polypy.launch import MAX_BLOCK, MAX_THREADS_PER_BLOCK

    out = []
    for site in host.launches:
        block = site.block_shape
        if block is None:
            out.append(LaunchVersion(site.kernel, site.loc, None, site.block_from, False))
            continue
        if block in shapes.get(site.kernel, ()):
            out.append(LaunchVersion(site.kernel, site.loc, block, site.block_from, True,
                                     coarse=plans.get((site.kernel, block))))
            continue
        threads = block[0] * block[1] * block[2]
        if threads > MAX_THREADS_PER_BLOCK or block[2] > MAX_BLOCK[2]:
            why = "more threads than a block may have (the launch fails as on a GPU)"
        else:
            why = f"{site.kernel} already has {len(shapes.get(site.kernel, ()))} specialized versions"
        out.append(LaunchVersion(site.kernel, site.loc, block, site.block_from, False, why=why))
    return out


# Why a registered pass may not run in a command (``--dump-after`` of it then says so).
_WHEN = {
    "version-bounds-checks": "the Python API makes bounds-checked versions on a launch whose footprints do not "
                             "prove its arrays in bounds; translate --check-bounds checks every access instead",
    "version-without-default": "only for a whole program's kernel whose every launch has a known block shape",
    "version-grid-bounds": "only for a whole program's kernel without a default whose launches of a block shape "
                           "all have grids known at compile time",
    "version-block-shapes": "only where a launch's block shape is known: a whole program or the Python API",
    "specialize-block-shape": "only where a launch's block shape is known: a whole program or the Python API",
    "version-unit-strides": "only for a kernel that reads tensor accessors (their last strides)",
    "specialize-unit-strides": "only for a kernel that reads tensor accessors (their last strides)",
}


def not_run_reason(name: str) -> str:
    """Why the registered pass ``name`` may not have run in a command (docs/architecture.md)."""
    return _WHEN.get(name, "not in this command's pipelines, or nothing in the input for it")


def lower_and_emit(module: n.Module, target: str, *, optimize: bool = True, report: list | None = None,
                   program: bool | None = None, threads: int = 0, check_bounds: bool = False,
                   timings: dict[str, float] | None = None) -> Any:
    """A GPU-form module (from ``load``) lowered with ``to_cpu`` and emitted for ``target``:

    ``cpu``: the CPU-form ``Module`` (for the JIT); ``cpu-ir``: its text; ``llvm``: optimized
    LLVM IR text (a whole program's kernels as the versions of its C translation, with the
    function choosing one: ``codegen.llvm.dispatch``); ``c``/``cpp``: C or C++ with OpenMP -- a whole program (``codegen.c.
    emit_program``, C++ only) where ``program`` (default: the module has host code), else the
    kernels with a launcher each. ``threads``/``check_bounds`` as for ``codegen.c``.
    """
    if target not in TARGETS:
        raise UserError(f"unknown target '{target}' (targets: {', '.join(TARGETS)})")
    # Each kernel's decisions, also for the C code's comments on removed barriers.
    decisions: dict[str, list] = {k.name: [] for k in module.kernels}
    if program is None:
        program = module.host is not None
    whole = program and target in ("c", "cpp")  # launched through the runtime's streams
    if not whole and target != "cpu-ir":
        from polypy.launch import refuse_held_pointers

        for k in module.kernels:
            refuse_held_pointers(k)
    kernels = tuple(to_cpu(k, optimize=optimize, report=decisions[k.name], timings=timings, program=whole)
                    for k in module.kernels)
    if report is not None:
        report.extend(d for k in module.kernels for d in decisions[k.name])
    cpu = dataclasses.replace(module, kernels=kernels)
    if target == "cpu":
        return cpu
    if target == "cpu-ir":
        from polypy.ir.printer import print_module

        return print_module(cpu)
    plans: dict = {}
    if target == "llvm":
        from codegen.llvm import emit_llvm_ir

        # A whole program's kernels: the versions its C translation has, with the same dispatch.
        made = whole_program_versions(module, kernels, optimize=optimize, plans=plans) \
            if program and module.host is not None else {}
        return emit_llvm_ir(cpu, optimize=optimize, versions=[v for v in made.values() if v.versions])
    if program:
        from codegen.c import emit_program
        from codegen.c.module import RUNTIME_INCLUDE, with_runtime
        from polypy.cccl import program_flags
        from polypy.passes.versions import program_block_shapes

        by_name = {k.name: k for k in kernels}
        versions = whole_program_versions(module, kernels, optimize=optimize, check_bounds=check_bounds, plans=plans)
        text = emit_program(module.host, by_name, threads=threads, check_bounds=check_bounds, barriers=decisions,
                            versions=versions, runtime=RUNTIME_INCLUDE, static_shared=static_shared(module))
        # A program using CCCL (Thrust) keeps the whole runtime: CCCL's headers use its names
        # (libcu++'s tuple interface of char1, float4...), and the slice reads only the program's uses.
        unused = None if program_flags(module.host) else _unused_runtime(text, module.host)
        text = with_runtime(text, unused)
        if report is not None:
            report.extend(launch_versions(module.host, program_block_shapes(module.host), plans))
            report.extend(module.host.copies)  # copies between host and device made or not (frontend.host_copies)
            report.extend(module.host.loops)  # host loops of launches merged into one parallel region or not
        return text
    from codegen.c import emit_kernels

    return emit_kernels(kernels, module.globals, source=module.source, cpp=target == "cpp", threads=threads,
                        check_bounds=check_bounds, barriers=decisions)


def whole_program_versions(module: n.Module, kernels: Sequence[n.Kernel], *, optimize: bool = True,
                           check_bounds: bool = False, plans: dict | None = None) -> dict:
    """The versions of the CPU-form ``kernels`` of the whole program ``module`` (GPU form, with
    host code), for either backend (``polypy.passes.versions.program_versions``): launches whose
    block shape is known get a version specialized for it and, where legal and it pays, one for
    coarse blocks (the decision the API makes per launch); ``plans`` receives the coarsening
    decisions per (kernel, shape)."""
    from polypy.coarsening import selectable_only
    from polypy.ir.visitor import walk
    from polypy.passes.versions import program_versions

    assert module.host is not None
    plans = {} if plans is None else plans
    coarsen = block_coarsener(module, optimize=optimize, decisions=plans) if optimize else None
    if coarsen is not None and not any(isinstance(x, n.Launch) for k in module.kernels for x in walk(k)):
        coarsen = selectable_only(coarsen, module.host, plans)  # (a launch from device code: any grid)
    return program_versions(module.host, {k.name: k for k in kernels}, coarsen=coarsen, check_bounds=check_bounds)


def _unused_runtime(text: str, host) -> dict | None:
    """The declarations of the runtime and of the kernel prelude a whole program does not use
    (``frontend.runtime_slice``): the program is read where its main file is, so that its own
    includes are found. The runtime's C entry points (for the program's plain C files) stay only
    in a file that is linked with others: one without ``main``, or compiled with ``-c``. The
    comments of both stay in their sources (``codegen.c.module.RUNTIME_NOTE`` says where)."""
    from codegen.c.module import PRELUDE_FILE
    from codegen.c.templates import prelude
    from frontend.runtime_slice import unused_runtime_lines

    main = host.main
    return unused_runtime_lines(text, os.path.join(os.path.dirname(os.path.abspath(main)), "polypy_program.cpp"),
                                extra_dirs=(os.path.dirname(os.path.abspath(main)),),
                                extra_files={PRELUDE_FILE: prelude()}, exports=host.part or not host.has_main,
                                comments=False)


def static_shared(module) -> dict[str, int]:
    """Per kernel of a GPU-form module, the bytes of its static ``__shared__`` arrays (the
    dynamic shared memory its launches may ask for is 48 KiB less these: ``codegen.c.emit_program``)."""
    from frontend.kernel_values import static_bytes

    return {k.name: static_bytes(k)[0] for k in module.kernels}
