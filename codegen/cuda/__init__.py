"""CUDA source from GPU-form IR (for the kernels ``polypy grad`` generates).

``print_cuda_kernel(kernel)`` / ``print_cuda_module(module)``: readable CUDA C++ that ``nvcc -c``
compiles and that polypy's own frontend reads back to the same IR semantics.
"""
from codegen.cuda.printer import format_const, format_expr, print_cuda_kernel, print_cuda_module

__all__ = ["print_cuda_kernel", "print_cuda_module", "format_expr", "format_const"]
