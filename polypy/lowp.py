"""Half (IEEE binary16) and bfloat16 values on the Python side.

In kernels, ``__half`` and ``__nv_bfloat16`` (polypy's ``cuda_fp16.h`` / ``cuda_bf16.h``) are
their 16 bits: the IR sees ``u16`` memory. The Python API takes np.float16 arrays (and scalars)
for ``__half`` and ``__half2`` (two consecutive elements per pair), and np.uint16 arrays holding
the bits for ``__nv_bfloat16`` and ``__nv_bfloat162``: NumPy has no bfloat16 dtype.
``to_bfloat16`` and ``from_bfloat16`` convert float32 values to those bits (round-to-nearest-even,
as ``__float2bfloat16`` does) and back (exactly).
"""
from __future__ import annotations

import pathlib
from typing import Any

import numpy as np

from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.visitor import walk

# The C spellings of the 16-bit float types (the typedef names of cuda_fp16.h / cuda_bf16.h too;
# PyTorch's c10::Half and c10::BFloat16, as clang spells them in a PyTorch extension's kernels:
# docs/torch_extensions.md).
HALF_NAMES = frozenset({"__half", "half", "__half2", "half2", "c10::Half", "at::Half", "torch::Half"})
BFLOAT16_NAMES = frozenset({"__nv_bfloat16", "nv_bfloat16", "__nv_bfloat162", "nv_bfloat162",
                            "c10::BFloat16", "at::BFloat16", "torch::BFloat16"})


def base_name(ctype: str) -> str:
    """``const __half *`` -> ``__half``: the type a parameter's C spelling names, without
    qualifiers and pointers (clang's spelling: tokens separated by spaces)."""
    words = [w for w in ctype.replace("*", " ").replace("&", " ").split()
             if w not in ("const", "volatile", "__restrict", "__restrict__", "restrict", "struct")]
    return words[-1] if words else ""


def is_half(ctype: str) -> bool:
    return base_name(ctype) in HALF_NAMES


def is_bfloat16(ctype: str) -> bool:
    return base_name(ctype) in BFLOAT16_NAMES


def accessor_elem(ctype: str) -> str | None:
    """``"half"`` or ``"bfloat16"`` for the C spelling of a PyTorch packed accessor of ``c10::Half``
    or ``c10::BFloat16`` elements (a kernel parameter whose data pointer, the IR parameter of the
    accessor's name, is that memory), else None. The frontend spells such an accessor type
    canonically (frontend/lower/accessors.py), so the element's qualified name is one of the
    spelling's words, and the class template's name another."""
    words = set(ctype.replace("<", " ").replace(">", " ").replace(",", " ").replace("*", " ").split())
    if not any(w.endswith("PackedTensorAccessor") for w in words):
        return None
    if "c10::Half" in words:
        return "half"
    return "bfloat16" if "c10::BFloat16" in words else None


def to_bfloat16(x: Any) -> np.ndarray:
    """float32 values as bfloat16 bits (np.uint16), rounded to nearest even; NaN: 0x7fff."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where((u & 0x7FFFFFFF) > 0x7F800000, np.uint16(0x7FFF), rounded).astype(np.uint16)


def from_bfloat16(bits: Any) -> np.ndarray:
    """bfloat16 bits (np.uint16) as float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


_RUNTIME = pathlib.Path(__file__).resolve().parent / "runtime"
_HEADERS = ("cuda_fp16.h", "cuda_bf16.h")


def _in_headers(loc: Loc | None) -> bool:
    if loc is None or pathlib.PurePath(loc.file).name not in _HEADERS:
        return False
    return pathlib.Path(loc.file).resolve().parent == _RUNTIME


def low_precision_use(kernel: n.Kernel) -> Loc | None:
    """Where ``kernel`` uses polypy's half or bfloat16 types, or None: the first statement of the
    source after code inlined from cuda_fp16.h / cuda_bf16.h (the statement that called it), or
    the kernel's own location (a parameter of such a type; no statement of the source after)."""
    if any(is_half(sp.ctype) or is_bfloat16(sp.ctype) for sp in kernel.source_params):
        return kernel.loc
    seen = False
    for node in walk(kernel):
        if not seen:
            seen = _in_headers(node.loc)
        elif isinstance(node, n.Stmt) and node.loc is not None and not _in_headers(node.loc):
            return node.loc
    return kernel.loc if seen else None
