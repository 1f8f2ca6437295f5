"""The polypy variants: the plug-in point for polypy's own backends.

* ``polypy-llvm``: ``polypy.compile(source)`` (LLVM JIT), launched as
  ``mod[kernel][grid, block, shmem](**args)`` -- exactly what a user calls, so argument binding
  and the footprint check are part of the measured time (microseconds against milliseconds).
* ``polypy-c``: the C/OpenMP source ``codegen.c`` emits for the kernel, compiled with the same
  compiler flags as the hand-written ports (``bench.build.CFLAGS``), so that "omp" and
  "polypy-c" differ only in their source; launched through ``codegen.c.CLibrary``, which
  compiles a version specialized for the launch's block shape on the first launch, as the JIT does,
  with coarse blocks where the model coarsens (``polypy.driver.coarsen.block_coarsener``), as the JIT does.
* ``polypy-fine``: ``polypy-llvm`` without block coarsening (``polypy.compile(..., coarsen=False)``):
  CUDA's blocks as they are, to show what coarsening buys.
* ``polypy-noopt``: built exactly as ``polypy-c`` from the *unoptimized* translation,
  ``lower_and_emit(module, "cpu", optimize=False)``: no barrier elimination or shared-memory forwarding and no
  CPU schedule passes (guards as bounds, interchange, fusion) -- what the GPU -> CPU lowering
  alone gives, for comparison.

A backend that is not there (yet) makes its factory raise ``Skip`` with the reason, and the
harness runs the rest. Both use ``bench.runner.threads()`` threads.
"""
from __future__ import annotations

from bench.build import CFLAGS
from bench.runner import Runner, Skip, threads
from samples.spec import Case, Sample


def make_polypy_llvm_variant(sample: Sample, case: Case) -> Runner:
    """``polypy.compile`` + launch syntax; compiled once per (sample, case), JIT cache on disk."""
    try:
        import polypy
    except ImportError as e:
        raise Skip(f"polypy is not importable: {e}") from None
    compile_module = getattr(polypy, "compile", None)
    if compile_module is None:
        raise Skip("polypy.compile (the LLVM JIT backend) does not exist yet")
    module = compile_module(sample.source, defines=dict(sample.defines), threads=threads())
    launch = module[sample.kernel][case.grid, case.block, case.shmem]
    return lambda args: launch(**args)


def make_polypy_fine_variant(sample: Sample, case: Case) -> Runner:
    """``polypy-llvm`` with ``coarsen=False``: one CPU block function call per CUDA block."""
    import polypy

    module = polypy.compile(sample.source, defines=dict(sample.defines), threads=threads(), coarsen=False)
    launch = module[sample.kernel][case.grid, case.block, case.shmem]
    return lambda args: launch(**args)


def make_polypy_c_variant(sample: Sample, case: Case) -> Runner:
    """Frontend -> ``lower_and_emit(..., "cpu")`` -> ``codegen.c.build_library`` (cc with ``CFLAGS``) -> ctypes."""
    try:
        from polypy.driver.library import build_library
        from polypy.driver.pipelines import lower_and_emit
        from polypy.driver.source import load
    except ImportError as e:
        raise Skip(f"the C/OpenMP backend is not available: {e}") from None
    from polypy.driver.coarsen import block_coarsener

    module = load(sample.source, defines=dict(sample.defines))
    cpu = lower_and_emit(_only(module, sample.kernel), "cpu").kernel(sample.kernel)
    library = build_library([cpu], module.globals, source=str(sample.source), threads=threads(), flags=CFLAGS,
                            coarsen=block_coarsener(module))
    return lambda args: library.launch(sample.kernel, case.grid, case.block, args, shmem=case.shmem)


def make_polypy_noopt_variant(sample: Sample, case: Case) -> Runner:
    """As ``polypy-c``, lowered with ``optimize=False``: the unoptimized translation."""
    try:
        from polypy.driver.library import build_library
        from polypy.driver.pipelines import lower_and_emit
        from polypy.driver.source import load
    except ImportError as e:
        raise Skip(f"the C/OpenMP backend is not available: {e}") from None
    module = load(sample.source, defines=dict(sample.defines))
    cpu = lower_and_emit(_only(module, sample.kernel), "cpu", optimize=False).kernel(sample.kernel)
    library = build_library([cpu], module.globals, source=str(sample.source), threads=threads(), flags=CFLAGS)
    return lambda args: library.launch(sample.kernel, case.grid, case.block, args, shmem=case.shmem)


def _only(module, kernel: str):
    """``module`` with kernel ``kernel`` alone (the one the sample launches)."""
    import dataclasses

    return dataclasses.replace(module, kernels=(module.kernel(kernel),))
