"""A whole program's launcher: the pools of the pointers a kernel reads from ``__constant__`` or
``__device__`` records (``Kernel.held_pointers``, ``frontend/lower/held_pointers.py``).

Each pool is three launcher locals, computed by the runtime from the symbol's bytes at the
launch (``polypy_rt_held_pointers`` in ``cuda_runtime.h``): the lowest allocation the pointers
point into, its address and the pool's length. A pointer into no live allocation (freed, host
memory) or misaligned stops the launch with a diagnostic located at the member's first read.

The rows of a ``T**`` pointer table are checked likewise (``table_row_check``): a row pointer not
aligned to ``T`` (``(float*)((char*)buf + 2)``) is a misaligned address on a GPU, while the
pool's element index ``(row - base) / sizeof(T)`` would silently round it down.
"""
from __future__ import annotations

from typing import Callable

from polypy.errors import format_diagnostic
from polypy.ir import nodes as n
from polypy.ir.printf import c_string

from codegen.c.render import c_type


def held_pointer_params(kernel: n.Kernel) -> set[str]:
    """The IR parameters of ``kernel`` that launchers compute (no C parameter maps to them)."""
    return {name for s in kernel.held_pointers for name in (s.pool, s.base, s.extent)}


def launcher_symbol(kernel: n.Kernel, symbol: str) -> str:
    """The module variable ``symbol`` as a launcher of ``kernel`` names it: from the global scope
    where a launcher's parameter has its name too (``__device__ float* grid[4];`` and the
    launcher's ``dim3 grid``, a kernel parameter)."""
    shadowed = {"grid", "block", "shmem_bytes"} | {sp.name for sp in kernel.source_params}
    return f"::{symbol}" if symbol in shadowed else symbol


def held_pointer_lines(kernel: n.Kernel, c_name: Callable[[str], str]) -> list[str]:
    """The launcher's lines computing each pool, its address and its length."""
    out: list[str] = []
    for i, s in enumerate(kernel.held_pointers):
        if s.symbol == n.HEAP:  # the device heap, made at the first launch that uses it (parts/heap.h)
            t = c_type(s.elem)
            out.append(f"void* polypy_held_{i} = 0;")
            out.append(f"unsigned long long {c_name(s.extent)} = 0u;")
            out.append(f"polypy_rt_heap_pool(&polypy_held_{i}, &{c_name(s.extent)}, {s.elem.itemsize}u);")
            out.append(f"{t}* {c_name(s.pool)} = ({t}*)polypy_held_{i};")
            out.append(f"unsigned long long {c_name(s.base)} = (unsigned long long)polypy_held_{i};")
            continue
        marker = "\x01"
        text = format_diagnostic(
            "error", f"pointer '{marker}' read from {s.symbol} here does not point into memory from cudaMalloc "
            f"(freed, host memory) or is not aligned to its type ({s.elem.itemsize} bytes): polypy cannot run this "
            "launch (on a GPU it would be an illegal address)", s.loc) + "\n"
        message = text.replace("%", "%%").replace(marker, "%s")
        offsets = ", ".join(f"{offset}u" for offset, _ in s.offsets)
        paths = ", ".join(c_string(path) for _, path in s.offsets)
        t = c_type(s.elem)
        pool, base, extent = c_name(s.pool), c_name(s.base), c_name(s.extent)
        symbol = launcher_symbol(kernel, s.symbol)
        out.append(f"static const size_t polypy_held_offsets_{i}[] = {{{offsets}}};")
        out.append(f"static const char* const polypy_held_paths_{i}[] = {{{paths}}};")
        out.append(f"void* polypy_held_{i} = 0;")
        out.append(f"unsigned long long {extent} = 0u;")
        out.append(f"polypy_rt_held_pointers({c_string(message)}, {c_string(s.symbol)}, (const void*)&{symbol}, "
                   f"{s.size}u, {s.count}u, polypy_held_offsets_{i}, polypy_held_paths_{i}, {len(s.offsets)}u, "
                   f"{s.elem.itemsize}u, &polypy_held_{i}, &{extent});")
        out.append(f"{t}* {pool} = ({t}*)polypy_held_{i};")
        out.append(f"unsigned long long {base} = (unsigned long long)polypy_held_{i};")
    return out


def table_row_check(kernel: n.Kernel, table: str, ir_table: str, elem_size: int) -> str:
    """The launcher's line checking the rows of the ``T**`` parameter ``table`` (the launcher's
    C parameter; ``ir_table`` its IR parameter): every non-null entry of the table's allocation,
    from the table's address on, must be aligned to ``elem_size`` (``polypy_rt_table_rows`` in
    ``cuda_runtime.h``), else the launch stops with a diagnostic naming the table and the row,
    located at the parameter."""
    marker = "\x01"
    p = kernel.param(ir_table)
    text = format_diagnostic(
        "error", f"row {marker} of pointer table '{table}' in kernel {kernel.name} is not aligned to its element "
        f"type ({elem_size} bytes): reading through it on a GPU is a misaligned address "
        "(cudaErrorMisalignedAddress); polypy cannot run this launch", (p.loc if p is not None else None) or kernel.loc)
    message = (text + "\n").replace("%", "%%").replace(marker, "%lu")
    return f"polypy_rt_table_rows({c_string(message)}, (const void*){table}, {elem_size}u);"
