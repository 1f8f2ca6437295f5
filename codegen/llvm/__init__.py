"""The LLVM backend: CPU-form IR -> LLVM IR (llvmlite) -> O3, vectorized, host-CPU machine code,
JIT-loaded, cached on disk, launched on all cores.

* ``lower``   -- kernels to LLVM IR functions ``K_worker(next, total, chunk, grid, block, shmem, ...)``
  (and ``K_blocks(first, last, ...)``), with one module per part of the emitter:
  ``abi`` (how a compiled kernel is called), ``function`` (the kernel's function, the state the
  other parts are passed: scratch, block loop, addresses, bounds checks), ``statements``,
  ``expressions``; ``dispatch`` (a kernel's versions and ``K_select``)
* ``mathlib`` -- the math functions (intrinsics or libm), keyed by canonical name
* ``target``  -- host target machine, O3 pipeline, object code
* ``cache``   -- the on-disk object cache
* ``jit``     -- ``compile_module`` / ``JitModule`` / ``JitKernel.run``; ``emit_llvm_ir``
* ``launch``  -- running a grid's blocks on worker threads (a persistent pool)
"""
from codegen.llvm.jit import JitKernel, JitModule, compile_module, emit_llvm_ir, global_storage
from codegen.llvm.launch import BoundsError, LaunchError, default_threads
from codegen.llvm.abi import KernelABI, kernel_abi

__all__ = ["BoundsError", "JitKernel", "JitModule", "KernelABI", "LaunchError", "compile_module", "default_threads",
           "emit_llvm_ir", "global_storage", "kernel_abi"]
