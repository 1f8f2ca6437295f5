"""The polypy variants: the plug-in point for polypy's own backends.

* ``polypy-llvm``: ``polypy.compile(source)`` (LLVM JIT), launched as
  ``mod[kernel][grid, block, shmem](**args)`` -- exactly what a user calls, so argument binding
  and the footprint check are part of the measured time (microseconds against milliseconds).
* ``polypy-c``: the C/OpenMP source ``codegen.c`` emits for the kernel, compiled with the same
  compiler flags as the hand-written ports (``bench.build.CFLAGS``), so that "omp" and
  "polypy-c" differ only in their source; launched through ``codegen.c.CLibrary``.

A backend that is not there (yet) makes its factory raise ``Skip`` with the reason, and the
harness runs the rest. Both use ``bench.variants.threads()`` threads.
"""
from __future__ import annotations

from bench.build import CFLAGS
from bench.variants import Runner, Skip, threads
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


def make_polypy_c_variant(sample: Sample, case: Case) -> Runner:
    """Frontend -> ``to_cpu`` -> ``codegen.c.emit_kernels`` -> cc with ``CFLAGS`` -> ctypes."""
    try:
        from codegen.c import CLibrary, compile_library, emit_kernels
        from polypy.driver import load, to_cpu
    except ImportError as e:
        raise Skip(f"the C/OpenMP backend is not available: {e}") from None
    module = load(sample.source, defines=dict(sample.defines))
    cpu = to_cpu(module.kernel(sample.kernel))
    text = emit_kernels([cpu], module.globals, source=str(sample.source), threads=threads())
    library = CLibrary(compile_library(text, flags=CFLAGS), [cpu], cpp=False, check_bounds=False,
                       globals_=module.globals)
    return lambda args: library.launch(sample.kernel, case.grid, case.block, args, shmem=case.shmem)
