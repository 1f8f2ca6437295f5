"""The gradient pipeline: optimize, differentiate, simplify (``polypy grad`` and the Python API).

::

    K (GPU form, after the driver's GPU pipeline)
      │  pipelines.BEFORE_AD: shared-memory forwarding and barrier elimination (gpu2cpu),
      │             loop-invariant code motion (hoist-invariants), SIMPLIFY
      ▼  autodiff.differentiate   (reverse: K_grad; forward: K_fwd)
      │  pipelines.AFTER_AD: constant folding, dead code
      ▼
    K_grad

Differentiating the *optimized* kernel is what keeps gradients cheap: a value hoisted out of a
loop before differentiation is computed, cached and differentiated once, not once per
iteration (vector normalization: O(n) instead of O(n^2)). Each optimization can be switched
off (``grad_kernel(..., optimize=False, cache="store", privacy=False, block_reductions=False)``)
so the benchmark can measure what it buys (``windows=False`` too).

Stages are imported inside the functions that use them (``polypy`` is the only wiring layer).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from polypy.errors import InternalError, UserError
from polypy.analysis.grid_sync import is_grid_sync
from polypy.ir.visitor import walk_only
from polypy.lowp import low_precision_use
from polypy.ir import nodes as n
from polypy.driver.pipelines import after_ad_pipeline, before_ad_pipeline
from polypy.passes import run_pipeline
from polypy.stack import on_big_stack


def _memoized(compute: Callable[..., Any], unproven: Callable[[Exception], Any], what: str) -> Callable[..., Any]:
    """``compute(kernel, buffer, *rest)`` remembered per arguments (IR nodes by identity).
    Unsupported input (a ``UserError``; islpy missing) is ``unproven(exc)``, the safe answer; any
    other failure of the model is an internal error, never a silent "not proved"."""
    cache: dict[tuple, Any] = {}

    def oracle(kernel: n.Kernel, buffer: str, *rest: Any) -> Any:
        key = (id(kernel), buffer) + tuple(id(a) if isinstance(a, n.Node) else a for a in rest)
        got = cache.get(key)
        if got is None:
            try:
                got = compute(kernel, buffer, *rest)
            except (UserError, ImportError) as exc:
                got = unproven(exc)
            except Exception as exc:
                raise InternalError(f"the {what} of {buffer!r} in kernel {kernel.name!r} failed: "
                                    f"{type(exc).__name__}: {exc}", kernel.loc) from exc
            cache[key] = got
        return got

    return oracle


def privacy_oracle(kernel: n.Kernel):
    """``buffer -> (private, reason[, condition])`` from the polyhedral model (``polypy.poly.sharing``).

    With a third element, the elements are private where ``condition`` (a grid-uniform IR
    ``bool``) holds: the gradient tests it at run time (a private and an atomic version).
    ``(buffer, reduced, kernel)``: the same of ``kernel`` (the one being differentiated), leaving
    out the reads ``reduced`` names (``(loc, text)``), whose adjoints are summed per block
    (``polypy.poly.sharing``).
    """
    def private(kernel: n.Kernel, buffer: str, reduced: frozenset = frozenset()) -> tuple:
        from polypy.poly import sharing

        s = sharing(kernel, buffer, reduced=reduced)
        if s.thread_private:
            got: tuple = (True, "isl: every element is accessed by at most one thread of the grid")
        elif s.private_when is not None:
            from polypy.ir.printer import format_expr

            got = (False, f"isl: every element is accessed by at most one thread of the grid when "
                          f"{format_expr(s.private_when)}", s.private_when)
        elif s.block_uniform:
            got = (False, "isl: every thread of a block accesses the same element, and the buffer is "
                          "written or several blocks share it")
        else:
            got = (False, "isl: threads may access the same element")
        if s.condition_gave_up and not s.thread_private:  # said in --report
            got = (got[0], f"{got[1]} ({s.condition_gave_up})") + got[2:]
        return got

    oracle = _memoized(private, lambda exc: (False, f"no proof ({exc})"), "privacy proof")
    return lambda buffer, reduced=frozenset(), other=None: oracle(other or kernel, buffer, reduced)


def interval_oracle():
    """``(kernel, path, load) -> (private, reason)`` from the polyhedral model
    (``polypy.poly.intervals``): no other thread of the block touches the element the shared-array
    load reads between the same two barriers."""
    def private(kernel: n.Kernel, buffer: str, path, load: n.Load) -> tuple[bool, str]:
        from polypy.poly.intervals import interval_private

        return interval_private(kernel, path, load)

    oracle = _memoized(private, lambda exc: (False, f"no proof ({exc})"), "interval privacy proof")
    return lambda kernel, path, load: oracle(kernel, load.buffer, path, load)


def window_oracle(kernel: n.Kernel):
    """``buffer -> Window | reason`` from the polyhedral model (``polypy.poly.block_window``);
    ``(buffer, kernel, chunk) -> Window | reason`` for one chunk of a serial loop of the kernel
    given (``polypy.poly.chunk_window``)."""
    def window(kernel: n.Kernel, buffer: str, chunk=None):
        from polypy.poly.windows import block_window, chunk_window

        return block_window(kernel, buffer) if chunk is None else chunk_window(kernel, buffer, chunk)

    oracle = _memoized(window, lambda exc: f"no proof ({exc})", "block window")

    def windows(buffer: str, chunked: n.Kernel | None = None, chunk=None):
        return oracle(kernel, buffer) if chunked is None else oracle(chunked, buffer, chunk)
    return windows


@on_big_stack  # deep input: the sweeps recurse once per level of nesting (polypy.stack)
def grad_kernel(module: n.Module, name: str, *, wrt=None, const=(), mode: str = "reverse",
                report: list | None = None, optimize: bool = True, cache: str = "auto",
                privacy: bool = True, block_reductions: bool = True, windows: bool = True,
                max_tape: int = 1 << 16, checkpoint_budget: int | None = None,
                runtime_tapes: bool | None = None, gather_inputs: tuple[str, ...] = (),
                scratch_outputs: tuple[str, ...] = ()) -> n.Kernel:
    """The gradient (``mode="reverse"``: ``<name>_grad``) or tangent (``"forward"``: ``<name>_fwd``)
    kernel of kernel ``name`` of a GPU-form ``module`` (as ``polypy.load`` returns it).

    ``wrt``: active inputs (default: every floating-point parameter); ``const``: parameters
    that get no shadow. ``report`` receives ``autodiff.Accumulation``/``autodiff.Caching``
    decisions. The options switch off one optimization each (for benchmarks): ``optimize``
    (passes before differentiation), ``cache`` (``auto``/``recompute``/``store``), ``privacy``
    (isl proofs that allow plain ``+=``), ``block_reductions``, ``windows`` (block-private
    accumulation of a read-only input's adjoints in shared memory, ``autodiff.windows``).
    ``checkpoint_budget``: snapshots per loop whose trip count is only known at run time (binomial
    checkpointing, ``autodiff.checkpoint``: memory bounded by the budget, not the trip count);
    without it such a loop's carried registers are recomputed from the loop entry.
    ``runtime_tapes``: tapes for loops whose trip count is a function of the arguments, sized at
    launch (True: wherever they are needed; None: only where recomputation fails; False: never).
    ``gather_inputs``: read-only inputs whose updates are built plain, for
    ``polypy.driver.gathered`` to move into tap launches (the result alone is not a gradient).
    ``scratch_outputs``: outputs whose contents, and whose shadows' contents, after ``K_grad``
    the caller never reads (reverse mode): ``K_grad`` leaves out its stores to those it does not
    read back itself (``autodiff.scratch``), so it no longer repeats the kernel's effect on them,
    and where isl proves every element stored once (``polypy.poly.written_once``) it only reads
    their shadows (the seeds), never zeroes them (``polypy.torch``'s backward).

    Assumes, like Enzyme for duplicated arguments, that distinct pointer arguments do not
    overlap. Launch the result with the same grid and block as the kernel; a kernel with
    ``extern __shared__`` memory needs twice its dynamic shared bytes (the shadow is
    interleaved with the primal array).
    """
    from autodiff import ReverseOptions, differentiate

    try:
        kernel = module.kernel(name)
    except KeyError:
        names = ", ".join(k.name for k in module.kernels) or "none"
        raise UserError(f"no kernel named '{name}' in {module.source or 'the module'} (kernels: {names})") from None
    if mode not in ("reverse", "forward"):
        raise UserError(f"unknown mode '{mode}': use reverse or forward")
    if kernel.held_pointers:  # their pools are no source parameters a shadow could follow
        slots = kernel.held_pointers[0]
        what = "use the device heap (malloc, free, new, delete in device code)" if slots.symbol == n.HEAP else \
            f"read pointers from __constant__ or __device__ memory ('{slots.symbol}')"
        raise UserError(f"gradients of kernels that {what} are not supported", slots.loc)
    if cache not in ("auto", "recompute", "store"):
        raise UserError(f"unknown caching strategy '{cache}': use auto, recompute or store")
    if checkpoint_budget is not None and (isinstance(checkpoint_budget, bool) or not isinstance(checkpoint_budget, int)
                                          or checkpoint_budget < 1):
        raise UserError(f"the checkpoint budget must be a positive number of snapshots, got {checkpoint_budget!r}")
    new_name = name + ("_grad" if mode == "reverse" else "_fwd")
    if any(k.name == new_name for k in module.kernels):
        raise UserError(f"the module already has a kernel named '{new_name}'", kernel.loc)
    half = low_precision_use(kernel)
    if half is not None:
        raise UserError(f"kernel '{name}' computes in half precision (__half / __nv_bfloat16 of cuda_fp16.h / "
                        "cuda_bf16.h), which polypy grad does not differentiate: CUDA's adjoints would be rounded "
                        "to 16 bits at every operation; compute in float to differentiate", half)
    grid_sync = next((x for x in walk_only(kernel, n.Barrier) if is_grid_sync(x)), None)
    if grid_sync is not None:
        raise UserError(f"kernel '{name}' uses grid.sync() (a cooperative launch), which polypy grad does not "
                        "differentiate", grid_sync.loc)
    wrt_t = tuple(wrt) if wrt is not None else None
    kernel = run_pipeline(kernel, before_ad_pipeline(optimize=optimize))
    options = ReverseOptions(cache=cache, privacy=privacy, block_reductions=block_reductions, windows=windows,
                             max_tape=max_tape, checkpoint_budget=checkpoint_budget, runtime_tapes=runtime_tapes)
    result = differentiate(kernel, mode=mode, wrt=wrt_t, const=tuple(const), name=new_name, options=options,
                           report=report, privacy=_taken_private(privacy_oracle(kernel), gather_inputs) if privacy else None,
                           windows=window_oracle(kernel) if windows else None,
                           intervals=interval_oracle() if privacy else None)
    if scratch_outputs and mode == "reverse":
        from autodiff.report import Caching
        from autodiff.scratch import drop_scratch_stores

        from autodiff.scratch import drop_seed_zeroing, guard_seed_zeroing, shadow_after
        from polypy.ir.printer import format_expr
        from polypy.poly.written_once import written_once, written_once_when

        result, dropped = drop_scratch_stores(result, scratch_outputs)
        for name in dropped:
            detail = "output: its stores are left out (the caller does not read it after K_grad, and K_grad " \
                     "does not read it back)"
            shadow = shadow_after(result, kernel, name)
            if shadow is not None and _proved(written_once, kernel, name):
                result, done = drop_seed_zeroing(result, shadow)
                if done:
                    detail += f"; {shadow} is only read (isl: every element of {name} is stored once, so no " \
                              "zeroing of its seed is read back)"
            elif shadow is not None:
                when = _asked(written_once_when, kernel, name)
                if when is not None:
                    result, done = guard_seed_zeroing(result, shadow, when)
                    if done:
                        detail += f"; {shadow} is only read when {format_expr(when)} (isl: then every element " \
                                  f"of {name} is stored once; tested once per launch, zeroed as consumed otherwise)"
            if report is not None:
                report.append(Caching(name, kernel.loc, "scratch", detail))
    return run_pipeline(result, after_ad_pipeline())


def _proved(question: Callable[..., bool], *args: Any) -> bool:
    """``question(*args)``, False where the model does not support the kernel (a ``UserError``,
    islpy missing): the safe answer."""
    try:
        return question(*args)
    except (UserError, ImportError):
        return False


def _asked(question: Callable[..., Any], *args: Any) -> Any:
    """``question(*args)``, None where the model does not support the kernel (as ``_proved``)."""
    try:
        return question(*args)
    except (UserError, ImportError):
        return None


def _taken_private(oracle, gather_inputs: tuple[str, ...]):
    """``oracle``, with the inputs of ``gather_inputs`` taken as private: plain updates, which
    ``polypy.driver.gathered`` then moves into tap launches (never run as one kernel)."""
    if not gather_inputs:
        return oracle
    return lambda buffer, *rest: ((True, "gather form") if buffer in gather_inputs else oracle(buffer, *rest))


def grad_module(module: n.Module, name: str, **options) -> n.Module:
    """``module`` with the gradient kernel of ``name`` appended."""
    g = grad_kernel(module, name, **options)
    return dataclasses.replace(module, kernels=module.kernels + (g,))


def gradient_source(module: n.Module, gradient: n.Kernel, *, defines: dict[str, str] | None = None) -> str:
    """CUDA source holding the module's kernels and ``gradient`` (``polypy grad --emit cuda``).

    A file without host code is reproduced verbatim (its device functions and comments
    included), preceded by the ``-D`` macros it was compiled with and followed by the generated
    kernel; otherwise (a whole program) the module's arrays and kernels are printed from the IR,
    so the result can be ``#include``d by a host program without a second ``main``.
    """
    from codegen.cuda import print_cuda_kernel, print_cuda_module
    from polypy.driver.cuda_function_pointers import refuse_function_pointers
    from polypy.sources import read_source

    origin = module.source or "<input>"
    head = [f"// Generated by polypy grad from {origin}: {gradient.name}.",
            "// Launch it with the grid and block of the original kernel (twice its dynamic shared memory",
            "// if it has extern __shared__ memory)."]
    original = None
    if module.host is None and module.source:
        try:
            original = read_source(module.source)  # as the frontend read it (a bad byte is U+FFFD)
        except OSError:
            original = None
    refuse_function_pointers(module, gradient)
    gradient, capacities, checks = _fixed_capacities(gradient)
    head += capacities
    parts = ["\n".join(head), ""]
    for name, value in (defines or {}).items():
        parts += [f"#ifndef {name}", f"#define {name} {value}", "#endif"]
    if original is not None:
        parts += ["", original.rstrip("\n"), "", "// ---- generated by polypy grad ----", "",
                  print_cuda_kernel(gradient, capacities=checks)]
    else:
        parts += ["", print_cuda_module(module, kernels=module.kernels + (gradient,),
                                        capacities={gradient.name: checks})]
    return "\n".join(parts)


CUDA_TAPE_CAPACITY = 1024  # default extent, in CUDA, of a tape dimension sized at launch elsewhere


def _fixed_capacities(gradient: n.Kernel) -> tuple[n.Kernel, list[str], tuple[tuple[n.Expr, str], ...]]:
    """``gradient`` with each extent that depends on the arguments replaced by a macro (CUDA has
    no per-thread arrays of run-time size), the comment and ``#define`` lines for them, and the
    ``(extent, macro)`` pairs the kernel checks on entry (a launch that needs more than the
    capacity fails instead of writing past its tapes)."""
    from autodiff.tapes import runtime_tapes
    from polypy.ir.printer import format_expr

    tapes = runtime_tapes(gradient)
    if not tapes:
        return gradient, [], ()
    macros: dict[n.Expr, str] = {}
    buffers = []
    for buf in gradient.buffers:
        if buf not in tapes:
            buffers.append(buf)
            continue
        shape = []
        for d in buf.shape or ():
            if isinstance(d, n.Const):
                shape.append(d)
                continue
            name = macros.setdefault(d, f"{gradient.name.upper()}_TRIPS_{len(macros)}")
            shape.append(n.Var(name, d.type))
        buffers.append(dataclasses.replace(buf, shape=tuple(shape)))
    lines = ["// Tapes of loops whose trip count is only known at launch have a fixed capacity here (the",
             "// Python API sizes them from each launch's arguments): a launch needs, for every thread,"]
    for expr, name in macros.items():
        lines.append(f"//   {name} >= ({format_expr(expr)})")
    lines += ["// (define them larger with -D for longer runs; --checkpoint-budget N bounds the memory of",
              "// loops that carry only registers instead). Each thread checks this on entry: a launch",
              "// that needs more fails a device-side assertion (as assert() would, -DNDEBUG or not), so",
              "// the launch fails with cudaErrorAssert ('device-side assert triggered', reported by the",
              "// next cudaDeviceSynchronize or cudaGetLastError) instead of writing past its tapes.",
              "// The check is for nvcc's device pass; polypy translate of this file catches an",
              "// overrun with --check-bounds."]
    for name in macros.values():
        lines += [f"#ifndef {name}", f"#define {name} {CUDA_TAPE_CAPACITY}", "#endif"]
    checks = tuple((expr, name) for expr, name in macros.items())
    return dataclasses.replace(gradient, buffers=tuple(buffers)), lines, checks


def gradient_cpp(module: n.Module, gradient: n.Kernel) -> str:
    """C++/OpenMP source of the module's kernels and ``gradient``, through the C backend."""
    from autodiff.tapes import uniform_extents
    from polypy.driver.pipelines import lower_and_emit

    gradient = uniform_extents(gradient)  # per-thread arrays are allocated once per launch there
    return lower_and_emit(dataclasses.replace(module, kernels=module.kernels + (gradient,)), "cpp", program=False)


def grad(kernel: Any, *, wrt=None, const=(), mode: str = "reverse", report: list | None = None, **options: Any):
    """The launchable gradient of a compiled kernel: ``polypy.grad(mod.saxpy, wrt=["x", "y"])``.

    ``kernel`` is what ``polypy.compile`` gives (``mod.name``). The result launches like it,
    ``g[grid, block](...)`` with the same grid, block and dynamic shared bytes as the kernel, and
    takes the arguments of the calling convention (a shadow after each active argument). It shares
    the module's ``__constant__``/``__device__`` arrays. ``options`` as for ``grad_kernel``, and
    ``gather`` (default True): the adjoints of read-only stencil inputs in tap launches run before
    the rest, with plain adds instead of atomics (``polypy.driver.gathered``; ``False``: one kernel;
    ``"taps"``: one launch per tap, never the single sweep of ``autodiff.sweep``).
    """
    from polypy.driver.api import CompiledKernel, CompiledModule

    if not isinstance(kernel, CompiledKernel):
        raise UserError("polypy.grad takes a compiled kernel (mod.<kernel> of polypy.compile(...)), "
                        f"got {type(kernel).__name__}")
    source = kernel.module.gpu
    if source is None or kernel.gpu is None:
        raise UserError(f"kernel {kernel.name!r} was compiled from CPU-form IR only; there is nothing to differentiate")
    gather = options.pop("gather", True)
    if gather not in (True, False, "taps", "sweep"):
        raise UserError(f"polypy.grad: gather is True, False, 'taps' or 'sweep', got {gather!r}")
    taps: tuple[n.Kernel, ...] = ()
    if gather and mode == "reverse":  # tap launches first, on the CPU (polypy.driver.gathered)
        from polypy.driver.gathered import gather_gradient

        taps, gradient = gather_gradient(source, kernel.name, grad_kernel, privacy_oracle, wrt=wrt, const=const,
                                         report=report, sweep=gather != "taps", **options)
    else:
        gradient = grad_kernel(source, kernel.name, wrt=wrt, const=const, mode=mode, report=report, **options)
    _warn_races(source, kernel.name, report)

    def compile_kernel(k: n.Kernel):
        k = with_accessors(k, kernel.gpu)
        compiled = CompiledModule.from_ir(dataclasses.replace(source, kernels=(k,), host=None),
                                          threads=kernel.module.threads)
        for name, storage in kernel.module.globals.items():
            compiled.globals[name] = storage  # one constant/device memory for the kernel and its gradient
        return compiled[k.name]

    from autodiff.tapes import runtime_tapes

    if runtime_tapes(gradient):
        return _SizedAtLaunch(gradient, compile_kernel, doubles_shared=_has_dynamic_shared(gradient))
    rest = _GradientKernel(compile_kernel(gradient), doubles_shared=_has_dynamic_shared(gradient))
    if taps:
        from polypy.driver.gathered import PhasedGradient

        return PhasedGradient(tuple(compile_kernel(t) for t in taps), rest)
    return rest


def with_accessors(gradient: n.Kernel, forward: n.Kernel) -> n.Kernel:
    """``gradient`` (``K_grad``, or one of its tap launches) with the tensor-accessor parameters
    of ``forward`` (``SourceParam`` with member paths ``.data()``, ``.size(d)``, ``.stride(d)``:
    ``frontend/lower/accessors.py``) that it takes whole: the shadow ``d_x`` of an accessor ``x``
    is indexed with ``x``'s strides, so the gradient's versions for unit last strides
    (``version-unit-strides``, which finds the strides there) apply to it too, and a launch may
    pass such an accessor as a dict by its C name as for ``forward``."""
    params = {p.name for p in gradient.params}
    taken = {sp.name for sp in gradient.source_params}
    found = tuple(sp for sp in forward.source_params
                  if any(path == ".data()" for path, _ in sp.members) and sp.name not in taken
                  and all(name in params for _, name in sp.members))
    if not found:
        return gradient
    return dataclasses.replace(gradient, source_params=gradient.source_params + found)


def _warn_races(module: n.Module, name: str, report: list | None) -> None:
    """What ``polypy grad`` prints about races in the kernel (a gradient of one schedule's result),
    as Python warnings, and in ``report`` when one is given."""
    import warnings

    from polypy.poly.race_report import RaceWarning, kernel_race_warnings

    from polypy.stack import call_on_big_stack

    # The race model's rewrites walk the kernel recursively (1,000 nested ifs): on the big stack
    # the API's other stages run on.
    for text in call_on_big_stack(kernel_race_warnings, module, name):
        warnings.warn(text, RuntimeWarning, stacklevel=3)
        if report is not None:
            report.append(RaceWarning(text))


def _has_dynamic_shared(kernel: n.Kernel) -> bool:
    return any(b.space == "shared" and b.shape is None for b in kernel.buffers)


class _GradientKernel:
    """A compiled gradient kernel launched with the *original* kernel's configuration.

    For ``extern __shared__`` memory the shadow array is interleaved with the primal one, so the
    gradient needs twice the kernel's dynamic shared bytes; the caller passes the kernel's.
    """

    def __init__(self, compiled: Any, *, doubles_shared: bool):
        self.compiled = compiled
        self.name = compiled.name
        self.doubles_shared = doubles_shared

    def _config(self, config: Any) -> Any:
        if self.doubles_shared and isinstance(config, tuple) and len(config) == 3:
            return config[:2] + (2 * config[2],)
        return config

    def __getitem__(self, config: Any):
        return self.compiled[self._config(config)]

    @property
    def emulate(self):
        inner = self.compiled.emulate
        outer = self

        class _Emulated:
            def __getitem__(self, config: Any):
                return inner[outer._config(config)]

        return _Emulated()

    @property
    def gpu(self) -> n.Kernel:
        return self.compiled.gpu

    def __repr__(self) -> str:
        return f"<polypy gradient kernel {self.name}>"

    def memory(self, config: Any, *args: Any, **kwargs: Any) -> dict[str, int]:
        """Elements per thread of the gradient's tapes and checkpoint snapshots for a launch
        (``autodiff.tapes``, ``autodiff.checkpoint``): {"tape": ..., "checkpoint": ...}."""
        return _memory(self.gpu, {})


def _memory(kernel: n.Kernel, extents: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """Elements per thread of ``kernel``'s tapes (``*_tape``) and snapshots (``*_snap*``)."""
    out = {"tape": 0, "checkpoint": 0}
    for buf in kernel.buffers:
        if buf.space != "local":
            continue
        dims = extents.get(buf.name)
        if dims is None:
            dims = tuple(int(d.value) for d in buf.shape or () if isinstance(d, n.Const))
        size = 1
        for d in dims:
            size *= d
        if "_snap" in buf.name:
            out["checkpoint"] += size
        elif "_tape" in buf.name:
            out["tape"] += size
    return out


class _SizedAtLaunch(_GradientKernel):
    """A gradient kernel with tapes sized from the launch's arguments (``autodiff.tapes``):
    each launch evaluates the tapes' extents, rounds them up to powers of two and runs the
    kernel compiled for those extents (compiled once per distinct set of extents)."""

    def __init__(self, gradient: n.Kernel, compile_kernel, *, doubles_shared: bool):
        self.gradient = gradient
        self.compile_kernel = compile_kernel
        self.name = gradient.name
        self.doubles_shared = doubles_shared
        self.variants: dict[tuple, Any] = {}
        self.extents: dict[tuple, dict[str, tuple[int, ...]]] = {}  # per launch shape and scalar arguments
        self.compiled = None

    def _extents(self, config: Any, args: tuple, kwargs: dict) -> dict[str, tuple[int, ...]]:
        from autodiff.tapes import tape_extents
        from polypy.launch import bind_arguments, launch_config

        grid, block, _ = launch_config(self.name, config, empty_grid=True)
        if args and kwargs:
            raise UserError(f"pass the arguments of kernel {self.name!r} either all by position or all by name")
        values = bind_arguments(self.gradient, kwargs if kwargs else args)
        scalars = {k: v for k, v in values.items() if not isinstance(v, np.ndarray)}
        # The extents are a function of the launch shape and the scalar arguments: remembered, so
        # that a gradient launched again (a backward pass per training step) asks isl once.
        key = (tuple(grid), tuple(block), tuple(sorted((k, repr(v)) for k, v in scalars.items())))
        got = self.extents.get(key)
        if got is None:
            got = tape_extents(self.gradient, grid, block, scalars)
            if len(self.extents) >= 64:
                self.extents.pop(next(iter(self.extents)))
            self.extents[key] = got
        return got

    def _variant(self, extents: dict[str, tuple[int, ...]]):
        from autodiff.tapes import capacity, size_tapes

        sized = {name: tuple(capacity(x) for x in dims) for name, dims in extents.items()}
        key = tuple(sorted(sized.items()))
        got = self.variants.get(key)
        if got is None:
            got = self.compile_kernel(size_tapes(self.gradient, sized))
            self.variants[key] = got
        return got

    def __getitem__(self, config: Any):
        def launch(*args: Any, **kwargs: Any) -> None:
            compiled = self._variant(self._extents(config, args, kwargs))
            compiled[self._config(config)](*args, **kwargs)
        return launch

    @property
    def emulate(self):
        outer = self

        class _Emulated:
            def __getitem__(self, config: Any):
                def launch(*args: Any, **kwargs: Any) -> None:
                    compiled = outer._variant(outer._extents(config, args, kwargs))
                    compiled.emulate[outer._config(config)](*args, **kwargs)
                return launch

        return _Emulated()

    @property
    def gpu(self) -> n.Kernel:
        return self.gradient

    @property
    def signature(self) -> n.Kernel:
        return self.gradient

    def memory(self, config: Any, *args: Any, **kwargs: Any) -> dict[str, int]:
        return _memory(self.gradient, self._extents(config, args, kwargs))

