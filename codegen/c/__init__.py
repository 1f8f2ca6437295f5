"""The C/C++ + OpenMP backend: CPU-form kernels as readable source.

* ``emit_kernel`` (``versions``): one kernel's versions (block functions, ``kernel``) and OpenMP launcher;
* ``emit_kernels`` / ``emit_program`` (``module``): a kernel library file, or a whole CUDA
  program as one self-contained C++ file;
* ``build_library`` / ``compile_library`` / ``CLibrary`` (``build``): compile with the system
  compiler and launch from Python with ctypes.

Statements and expressions are rendered by a Python visitor (``render``); the jinja2 templates
in ``codegen/templates`` hold the file-level boilerplate (prelude, launcher, file layout).
"""
from codegen.c.build import CLibrary, CompilerNotFound, build_library, compile_library, find_compiler
from codegen.c.kernel import KernelCode, Options
from codegen.c.versions import emit_kernel
from codegen.c.module import emit_kernels, emit_program, runtime_header

__all__ = [
    "CLibrary", "CompilerNotFound", "KernelCode", "Options", "build_library", "compile_library", "emit_kernel",
    "emit_kernels", "emit_program", "find_compiler", "runtime_header",
]
