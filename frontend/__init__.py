"""The C/CUDA frontend: libclang → GPU-form polypy IR.

``parse_file(path)`` returns a ``polypy.ir.Module``. Only this package imports ``clang.cindex``.
"""
from frontend.parse import parse_file

__all__ = ["parse_file"]
