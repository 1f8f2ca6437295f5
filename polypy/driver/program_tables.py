"""``T**`` pointer tables in emulated whole programs (``polypy run --emulate``).

The frontend turns a ``float** rows`` parameter into its table (the row addresses), a pool and
the pool's address: ``rows[i][j]`` is ``rows_pool[(rows[i] - rows_base) / sizeof(float) + j]``.
The launcher takes as pool the allocation the first row points into. Natively that is exact for
rows in any allocation (the address arithmetic lands on each row where it is), but the emulator
sees the pool as a NumPy view of that one allocation, so a row of another ``cudaMalloc`` was an
out-of-bounds error.

``gather_tables`` gives the emulator what the rows really are: where a table's rows lie in more
than one allocation, those allocations are copied, one after another, into one NumPy pool, the
table is rewritten to point into it (the program's table in device memory is left as it is), and
after the launch every allocation is copied back. The copy is coherent only if nothing else of the
launch reaches those allocations: another pointer argument or another table into one of them is
refused with a located error. A row pointer not aligned to its element type is refused for
every table (``_check_rows``), as the native launcher does: a GPU faults on it.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType

_ALIGN = 256  # each allocation starts at this alignment in the gathered pool, as cudaMalloc's do


def gather_tables(kernel: n.Kernel, values: dict[str, Any], find_alloc: Any) -> Callable[[], None]:
    """Rewrite, in ``values`` (the launch's arguments by IR parameter, arrays viewing device
    memory), each ``T**`` table whose rows lie in several allocations (see the module docstring);
    the returned function copies the gathered allocations back after the launch."""
    tables = [dict(sp.members) | {"name": sp.name} for sp in kernel.source_params
              if n.TABLE_POOL in dict(sp.members)]
    if not tables:
        return lambda: None
    for t in tables:
        _check_rows(kernel, t, values)
    owners: dict[int, str] = {}  # allocation base -> what reaches it (a parameter or a table)
    gathered: list[tuple[str, dict[str, str], dict[int, int]]] = []
    for t in tables:
        allocations = _row_allocations(values[t[""]], find_alloc)
        if len(allocations) > 1:
            gathered.append((t["name"], t, allocations))
        for base in allocations:
            owners.setdefault(base, f"table '{t['name']}'")
    table_params = {name for t in tables for path, name in t.items() if path != "name"}
    for p in kernel.params:
        if p.name in table_params or not isinstance(p.ptype, PointerType):
            continue
        a = values.get(p.name)
        if isinstance(a, np.ndarray) and a.size:
            base = _allocation(a.__array_interface__["data"][0], find_alloc)
            if base is not None:
                owners.setdefault(base, f"argument '{p.name}'")
                _refuse_shared(kernel, gathered, base, f"argument '{p.name}'")
    for name, _, allocations in gathered:
        for base in allocations:
            owner = owners.get(base)
            if owner is not None and owner != f"table '{name}'":
                _refuse_shared(kernel, gathered, base, owner)
            for other, _, more in gathered:
                if other != name and base in more:
                    _refuse_shared(kernel, gathered, base, f"table '{other}'")
    write_backs = [_gather(kernel, name, t, allocations, values) for name, t, allocations in gathered]

    def write_back() -> None:
        for w in write_backs:
            w()
    return write_back


def _check_rows(kernel: n.Kernel, t: dict[str, str], values: dict[str, Any]) -> None:
    """Every non-null row of table ``t`` must be aligned to its element type: on a GPU reading
    through a misaligned row is a fault (cudaErrorMisalignedAddress), while the pool's element
    index ``(row - base) / sizeof(T)`` would round it down. The launcher checks the same
    (``polypy_rt_table_rows``)."""
    size = values[t[n.TABLE_POOL]].dtype.itemsize
    for k, address in enumerate(np.asarray(values[t[""]]).reshape(-1)):
        if int(address) % size:
            p = kernel.param(t[""])
            raise UserError(f"row {k} of pointer table '{t['name']}' in kernel {kernel.name} is not aligned to its "
                            f"element type ({size} bytes): reading through it on a GPU is a misaligned address "
                            "(cudaErrorMisalignedAddress); polypy cannot run this launch",
                            (p.loc if p is not None else None) or kernel.loc)


def _row_allocations(table: np.ndarray, find_alloc: Any) -> dict[int, int]:
    """The allocations (base -> size) the non-null entries of ``table`` point into."""
    out: dict[int, int] = {}
    base, size = ctypes.c_void_p(), ctypes.c_size_t()
    for address in {int(x) for x in np.asarray(table).reshape(-1) if x}:
        if find_alloc(address, ctypes.byref(base), ctypes.byref(size)):
            out[int(base.value or 0)] = int(size.value)
    return out


def _allocation(address: int, find_alloc: Any) -> int | None:
    base, size = ctypes.c_void_p(), ctypes.c_size_t()
    return int(base.value or 0) if address and find_alloc(address, ctypes.byref(base), ctypes.byref(size)) else None


def _refuse_shared(kernel: n.Kernel, gathered: list, base: int, owner: str) -> None:
    for name, _, allocations in gathered:
        if base in allocations:
            raise UserError(f"kernel '{kernel.name}': rows of pointer table '{name}' lie in several cudaMalloc "
                            f"allocations and {owner} reaches one of them too; the emulator runs such a table on a "
                            "copy of its rows and cannot keep the two coherent (polypy run without --emulate runs it)",
                            kernel.loc)


def _gather(kernel: n.Kernel, name: str, t: dict[str, str], allocations: dict[int, int],
            values: dict[str, Any]) -> Callable[[], None]:
    pool_dtype = values[t[n.TABLE_POOL]].dtype
    offsets: dict[int, int] = {}
    total = 0
    for base in sorted(allocations):
        offsets[base] = total
        total += -(-allocations[base] // _ALIGN) * _ALIGN
    storage = np.zeros(total + _ALIGN, dtype=np.uint8)
    start = -storage.__array_interface__["data"][0] % _ALIGN
    pool = storage[start:start + total]
    for base, size in allocations.items():
        pool[offsets[base]:offsets[base] + size] = np.frombuffer((ctypes.c_char * size).from_address(base), np.uint8)
    new_base = pool.__array_interface__["data"][0]
    table = np.array(values[t[""]], dtype=np.uint64, copy=True)
    bases = sorted(allocations)
    for k, address in enumerate(table):
        a = int(address)
        owner = max((b for b in bases if b <= a < b + max(allocations[b], 1)), default=None)
        if owner is None:
            continue  # a null or unknown pointer: the emulator finds it out of bounds if it is used
        if (a - owner) % pool_dtype.itemsize:
            raise UserError(f"kernel '{kernel.name}': row {k} of pointer table '{name}' is not aligned to its "
                            f"element type ({pool_dtype})", kernel.loc)
        table[k] = new_base + offsets[owner] + (a - owner)
    values[t[""]] = table
    values[t[n.TABLE_POOL]] = pool.view(pool_dtype)
    values[t[n.TABLE_BASE]] = np.uint64(new_base)

    def write_back() -> None:
        for base, size in allocations.items():
            np.frombuffer((ctypes.c_char * size).from_address(base), np.uint8)[:] = pool[offsets[base]:offsets[base] + size]
    return write_back
