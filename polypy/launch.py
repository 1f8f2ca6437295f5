"""Launches, as every launch path sees them: CUDA's limits, launch shapes and arguments.

The one place for what the emulator, the LLVM JIT (``polypy.driver.api``), the C launchers
(``codegen.c``), the polyhedral model and ``polypy.distributed`` agree on:

* ``MAX_BLOCK``, ``MAX_THREADS_PER_BLOCK``, ``MAX_GRID``: CUDA's limits on a launch's shape;
* ``dims`` / ``grid_shape`` / ``block_shape`` / ``launch_config``: an int or a tuple of 1 to 3
  ints as ``(x, y, z)``, checked against those limits (a grid may have no blocks where the
  caller runs such a launch as one that does nothing); ``check_block_shape``: a block shape of
  1 to 3 positive ints, without CUDA's limits (for specializations);
* ``bind_arguments``: launch arguments bound to IR parameters, the way a CUDA launch uses them;
* ``launch_positive``: whether an expression is at least 1 at every launch (``(int)blockDim.x``);
  ``holds_at_launch``: whether a grid-uniform condition holds at one launch.

Every launch path takes arguments as a user of numba or CuPy passes them, by position in the C
signature or by name. Pointer parameters take C-contiguous NumPy arrays of exactly the element
type (normally 1-D; an N-D array is its flat memory, as ``cudaMemcpy`` would see it). They are
modified in place, like device memory copied back after the kernel. Scalar parameters take
numbers of the parameter's range, converted to the parameter type (an integer that the type
cannot hold, or a negative number for an unsigned type, is refused rather than wrapped as C
would; so is a float with a fraction for an integer type). Anything else is a ``UserError``
naming the parameter.

A struct passed by value was split by the frontend into one IR parameter per scalar member
(``Kernel.source_params``); the caller may pass it whole, by its C name, as a dict of fields
(nested dicts for nested structs), a NumPy structured scalar, or any object with attributes.
"""
from __future__ import annotations

import functools
import numbers
import operator
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType, ScalarType, normalize_value, wrap_int
from polypy.lowp import accessor_elem, is_bfloat16, is_half

Dim3 = tuple[int, int, int]

# CUDA's limits, checked as a GPU would (the compiled code itself has none).
MAX_BLOCK: Dim3 = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
MAX_GRID: Dim3 = ((1 << 31) - 1, 65535, 65535)


# The largest value each launch dimension can take (CUDA's limits: 1024 threads per block,
# 2**31 - 1 blocks along x, 65535 along y and z).
_LAUNCH_MAX = {n.BlockDim: MAX_BLOCK, n.GridDim: MAX_GRID}


def launch_positive(e: n.Expr, ty: ScalarType) -> bool:
    """Whether the integer ``e`` is at least 1 at every launch, computed without wrapping in any
    type it passes through and in ``ty``: a product of launch dimensions (``blockDim``,
    ``gridDim``, each at least 1) and positive constants, through casts between integer types
    (``(int)blockDim.x``, the step of a block-strided loop ``for (c = tid; c < n; c +=
    blockDim.x)``). A step like that is a constant at launch, so the loop's trip count is a
    function the driver evaluates there (``autodiff.loops.runtime_trip_bound``), and an
    empty loop stepped by it ends (``eliminate-dead-code``)."""
    hi = _positive_bound(e)
    return hi is not None and ty.is_int and hi < (1 << (ty.bits - 1 if ty.is_signed else ty.bits))


def _positive_bound(e: n.Expr) -> int | None:
    """An upper bound on ``e`` if it is a product as ``launch_positive`` describes (>= 1, no
    wrapping in its own type), else None."""
    if isinstance(e, (n.BlockDim, n.GridDim)):
        return _LAUNCH_MAX[type(e)][e.dim]
    if isinstance(e, n.Const):
        return int(e.value) if e.type.is_int and int(e.value) >= 1 else None
    if isinstance(e, n.Cast) and e.to.is_int and e.x.type.is_int:
        hi = _positive_bound(e.x)
        return hi if hi is not None and hi < (1 << (e.to.bits - 1 if e.to.is_signed else e.to.bits)) else None
    if isinstance(e, n.Binary) and e.op == "mul" and e.type.is_int:
        a, c = _positive_bound(e.a), _positive_bound(e.b)
        if a is None or c is None:
            return None
        hi = a * c
        return hi if hi < (1 << (e.type.bits - 1 if e.type.is_signed else e.type.bits)) else None
    return None


def holds_at_launch(cond: n.Expr, kernel: str, config: Any, args: Mapping[str, Any]) -> bool:
    """Whether the grid-uniform ``cond`` (over ``gridDim``, ``blockDim`` and integer arguments)
    holds at the launch of ``kernel`` with ``config`` and ``args`` (by IR name); False where
    they do not decide it."""
    grid, block, _ = launch_config(kernel, config, empty_grid=True)
    ints = tuple(sorted((name, int(v)) for name, v in args.items()
                        if isinstance(v, (int, np.integer)) and not isinstance(v, bool)))
    return _holds(cond, grid, block, ints)


@functools.lru_cache(maxsize=256)
def _holds(cond: n.Expr, grid: Dim3, block: Dim3, ints: tuple[tuple[str, int], ...]) -> bool:
    """``holds_at_launch``, remembered (folding the condition is a walk over its IR: a backward
    per training step asks it again with the same launch)."""
    from polypy.ir.versions import Facts, known

    value = known(cond, Facts(grid=grid, block=block, arguments=dict(ints)))
    return isinstance(value, n.Const) and bool(value.value)


def dims(value: Any, what: str, limits: Dim3, *, lowest: int = 1) -> Dim3:
    """``value`` (an int or a sequence of 1 to 3 ints) as ``(x, y, z)``, missing dimensions 1,
    each in ``[lowest, limit]``."""
    if isinstance(value, (int, np.integer)):
        ds = [value]
    else:
        try:
            ds = list(value)
        except TypeError:
            ds = []
    if not 1 <= len(ds) <= 3 or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in ds):
        raise UserError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    full = [int(d) for d in ds] + [1] * (3 - len(ds))
    for d, limit, axis in zip(full, limits, "xyz"):
        if not lowest <= d <= limit:
            raise UserError(f"{what}.{axis} = {d} is outside CUDA's range [{lowest}, {limit}]")
    return full[0], full[1], full[2]


def grid_shape(value: Any, *, empty: bool = False) -> Dim3:
    """A launch's grid; ``empty``: a 0 is allowed (the caller runs the launch as a no-op)."""
    return dims(value, "grid", MAX_GRID, lowest=0 if empty else 1)


def block_shape(value: Any) -> Dim3:
    """A launch's block, at most ``MAX_THREADS_PER_BLOCK`` threads."""
    block = dims(value, "block", MAX_BLOCK)
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise UserError(f"block of {threads} threads; CUDA allows at most {MAX_THREADS_PER_BLOCK}")
    return block


def launch_config(kernel: str, config: Any, *, empty_grid: bool = False) -> tuple[Dim3, Dim3, int]:
    """``(grid, block, shmem)`` of ``kernel[config]``; ``empty_grid``: a 0 in ``grid`` is allowed
    (the caller runs such a launch as one that does nothing)."""
    if not isinstance(config, tuple) or len(config) not in (2, 3):
        raise UserError(f"launch kernel {kernel!r} as kernel[grid, block] or kernel[grid, block, shmem_bytes], "
                        f"got kernel[{config!r}]")
    grid = grid_shape(config[0], empty=empty_grid)
    block = block_shape(config[1])
    shmem = config[2] if len(config) == 3 else 0
    if isinstance(shmem, bool) or not isinstance(shmem, (int, np.integer)) or shmem < 0:
        raise UserError(f"shared memory must be a non-negative number of bytes, got {shmem!r}")
    return grid, block, int(shmem)


def check_block_shape(block: tuple[int, ...]) -> Dim3:
    """``block`` (1 to 3 positive ints) as three ints, missing dimensions 1."""
    try:
        ds = tuple(operator.index(d) for d in block if not isinstance(d, bool))
    except TypeError:
        ds = ()
    if len(ds) != len(block) or not 1 <= len(ds) <= 3 or min(ds) < 1:
        raise UserError(f"a block shape is 1 to 3 positive ints, got {block!r}")
    return (*ds, *(1,) * (3 - len(ds)))  # type: ignore[return-value]


def bind_arguments(kernel: n.Kernel, args: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
    """Checked values for every IR parameter, by name: 1-D views of the caller's arrays for
    pointer parameters (stores reach the caller), NumPy scalars of the parameter type otherwise.

    ``args`` is positional in the C signature's order (or in IR parameter order), or a mapping
    from C parameter names (structs whole) or IR parameter names to values.
    """
    by_name = _by_ir_name(kernel, args)
    out: dict[str, Any] = {}
    for p in kernel.params:
        if p.name not in by_name:
            raise UserError(f"missing argument for parameter {c_name(kernel, p.name)!r} of kernel "
                            f"{kernel.name!r}", kernel.loc)
        value = by_name[p.name]
        if isinstance(p.ptype, PointerType):
            out[p.name] = _array(kernel, p, p.ptype, value)
        else:
            out[p.name] = _scalar(kernel, p, p.ptype, value)
    return out


def refuse_held_pointers(kernel: n.Kernel) -> None:
    """Pointers read from ``__constant__``/``__device__`` records (``Kernel.held_pointers``) point
    into ``cudaMalloc`` memory a whole program's runtime knows; NumPy arrays are no such memory."""
    if kernel.held_pointers:
        slots = kernel.held_pointers[0]
        raise UserError(f"kernel '{kernel.name}' {slots.what()}: supported in whole programs only (polypy "
                        "translate or run of a file with host code), not through the Python API", slots.loc)


def _structs(kernel: n.Kernel) -> dict[str, n.SourceParam]:
    return {sp.name: sp for sp in kernel.source_params if sp.members != (("", sp.name),)}


def c_name(kernel: n.Kernel, ir_name: str) -> str:
    """``p.alpha`` for the IR parameter holding member ``alpha`` of struct parameter ``p``."""
    for sp in _structs(kernel).values():
        for path, name in sp.members:
            if name == ir_name:
                return sp.name + path
    return ir_name


def _by_ir_name(kernel: n.Kernel, args: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
    if not isinstance(args, Mapping) or \
            any(name not in args for s in kernel.held_pointers for name in (s.pool, s.base, s.extent)):
        refuse_held_pointers(kernel)  # (a whole program's emulated launch gives them: programs.py)
    params = kernel.params
    structs = _structs(kernel)
    if not isinstance(args, Mapping):
        values = list(args)
        c_names = [sp.name for sp in kernel.source_params]
        if structs and len(values) == len(c_names) and \
                {name for sp in kernel.source_params for _, name in sp.members} == {p.name for p in params}:
            args = dict(zip(c_names, values))  # positional in the C signature's order
        elif len(values) != len(params):
            raise UserError(f"kernel {kernel.name!r} takes {len(params)} arguments, got {len(values)}", kernel.loc)
        else:
            return {p.name: v for p, v in zip(params, values)}
    out: dict[str, Any] = {}
    for key, value in args.items():
        if key in structs and n.TABLE_POOL in dict(structs[key].members) and not isinstance(value, np.ndarray):
            # a T** given as a list of arrays (an array is its IR table: the table has the C name)
            out.update(_pointer_table(kernel, structs[key], value))
        elif kernel.param(key) is not None:
            out[key] = value
        elif key in structs:
            if (is_half(structs[key].ctype) or is_bfloat16(structs[key].ctype)) and \
                    not isinstance(value, (Mapping, np.void)):
                value = _half_fields(kernel, structs[key], value)
            for path, name in structs[key].members:
                if path == n.NONNULL:  # whether the pointer is not null (a launch passes an array)
                    out[name] = np.int32(value is not None)
                    continue
                out[name] = _member(kernel, structs[key], value, path)
        else:
            raise UserError(f"kernel {kernel.name!r} has no parameter {key!r}", kernel.loc)
    for sp in structs.values():  # a pointer given by its own name: whether it is null
        paths = dict(sp.members)
        if n.NONNULL in paths and paths[n.NONNULL] not in out and paths.get("") in out:
            out[paths[n.NONNULL]] = np.int32(out[paths[""]] is not None)
    return out


def arrays_apart(arrays: Mapping[str, np.ndarray]) -> Callable[[str, str], bool]:
    """For the guard ``ArraysApart`` (``polypy.ir.versions``): whether two pointer arguments of a
    launch (by IR name) share no memory (two views of one array are not apart)."""
    def apart(a: str, b: str) -> bool:
        x, y = arrays.get(a), arrays.get(b)
        return x is not None and y is not None and not np.may_share_memory(x, y)

    return apart


def storage_root(a: np.ndarray) -> np.ndarray:
    """The array whose memory ``a`` views (the last NumPy array of its ``base`` chain)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _pointer_table(kernel: n.Kernel, sp: n.SourceParam, value: Any) -> dict[str, Any]:
    """A ``T**`` argument: a list of arrays that all view one C-contiguous array (the pool the
    frontend's pointer table points into): the table of their addresses, the pool, its address."""
    names = dict(sp.members)
    pool_param = kernel.param(names[n.TABLE_POOL])
    assert pool_param is not None and isinstance(pool_param.ptype, PointerType)
    want = pool_param.ptype.elem.dtype
    what = f"argument {sp.name!r} of kernel {kernel.name!r} ({sp.ctype})"
    arrays = list(value) if isinstance(value, (list, tuple)) else []
    if not arrays or not all(isinstance(a, np.ndarray) and a.dtype == want for a in arrays):
        raise UserError(f"{what} must be a non-empty list of numpy arrays of {want} (views of one array)", kernel.loc)

    pool = storage_root(arrays[0])
    if any(storage_root(a) is not pool for a in arrays) or pool.dtype != want or not pool.flags.c_contiguous:
        raise UserError(f"{what}: the arrays must all be views of one C-contiguous array of {want}", kernel.loc)
    pool = pool.reshape(-1)
    start = pool.__array_interface__["data"][0]
    for k, a in enumerate(arrays):
        # The kernel reads row k as consecutive elements from its first: a strided view (every
        # other element) or one starting inside an element would be read as other elements.
        if not a.flags.c_contiguous:
            raise UserError(f"{what}: row {k} is not contiguous (a strided view); the kernel reads consecutive "
                            "elements from its start", kernel.loc)
        if (a.__array_interface__["data"][0] - start) % want.itemsize:
            raise UserError(f"{what}: row {k} does not start on an element of the array it views", kernel.loc)
    table = np.array([a.__array_interface__["data"][0] for a in arrays], dtype=np.uint64)
    return {names[""]: table, names[n.TABLE_POOL]: pool,
            names[n.TABLE_BASE]: np.uint64(pool.__array_interface__["data"][0])}


def _half_fields(kernel: n.Kernel, sp: n.SourceParam, value: Any) -> dict[str, Any]:
    """A ``__half`` (``__half2``) argument given as a number (a pair), or a ``__nv_bfloat16``
    (``__nv_bfloat162``) given as its bits (np.uint16): the bits by member path."""
    if is_bfloat16(sp.ctype):
        given = np.asarray(value)
        if given.dtype != np.uint16:
            raise UserError(f"argument {sp.name!r} of kernel {kernel.name!r} ({sp.ctype}) takes bfloat16 bits as "
                            f"np.uint16 (polypy.lowp.to_bfloat16), got {given.dtype}", kernel.loc)
        values = list(given.reshape(-1))
    else:
        values = list(np.asarray(value, dtype=np.float16).reshape(-1))
    if len(values) != len(sp.members):
        raise UserError(f"argument {sp.name!r} of kernel {kernel.name!r} ({sp.ctype}) takes {len(sp.members)} "
                        f"half value(s), got {len(values)}", kernel.loc)
    out: dict[str, Any] = {}
    for (path, _), v in zip(sp.members, values):
        fields = path.split(".")[1:]
        at = out
        for f in fields[:-1]:
            at = at.setdefault(f, {})
        at[fields[-1]] = np.uint16(v.view(np.uint16))
    return out


def _member(kernel: n.Kernel, sp: n.SourceParam, value: Any, path: str) -> Any:
    current = value
    for field in path.split(".")[1:]:
        if isinstance(current, Mapping):
            found = field in current
            current = current[field] if found else None
        elif isinstance(current, np.void) and current.dtype.names is not None:
            found = field in current.dtype.names
            current = current[field] if found else None
        else:
            found = hasattr(current, field)
            current = getattr(current, field, None)
        if not found and "[" in field:  # `a[1][2]` of an array member given as an array: its element
            current = _member(kernel, sp, value, path[:path.index(field)] + field[:field.index("[")])
            try:
                for k in field[field.index("["):].strip("[]").split("]["):
                    current = current[int(k)]
                found = True
            except (TypeError, IndexError, KeyError, ValueError):
                found = False
        if not found:
            raise UserError(f"argument {sp.name!r} of kernel {kernel.name!r} ({sp.ctype}) has no field "
                            f"{sp.name + path!r}", kernel.loc)
    return current


def _what(kernel: n.Kernel, p: n.Param, ptype: PointerType | ScalarType) -> str:
    # Built only for an error message: launches bind arguments on every call.
    return f"argument {c_name(kernel, p.name)!r} of kernel {kernel.name!r} (parameter type {ptype})"


def _array(kernel: n.Kernel, p: n.Param, ptype: PointerType, value: Any) -> np.ndarray:
    want = ptype.elem.dtype
    if not isinstance(value, np.ndarray):
        raise UserError(f"{_what(kernel, p, ptype)} must be a numpy array of {want}, got {type(value).__name__}",
                        p.loc)
    if value.dtype.names is not None and value.flags.c_contiguous and value.nbytes % want.itemsize == 0 and \
            any(name == p.name for sp in _structs(kernel).values() for _, name in sp.members):
        # A pointer to records of mixed member types is one IR parameter per member type (the
        # frontend's views): each views the records' bytes (a structured array with the C layout).
        return value.reshape(-1).view(np.uint8).view(want)
    if value.dtype != want and value.flags.c_contiguous and value.nbytes % want.itemsize == 0 and \
            any(is_void_pointer(sp.ctype) and any(name == p.name for _, name in sp.members)
                for sp in kernel.source_params):
        # A `void*` parameter (its buffer typed by the kernel's casts, frontend/lower/untyped.py):
        # the array's bytes, whatever its dtype, as cudaMemcpy would see them.
        return value.reshape(-1).view(np.uint8).view(want)
    if value.dtype == np.float16 and want == np.uint16 and value.flags.c_contiguous and \
            any(is_half(sp.ctype) or accessor_elem(sp.ctype) == "half" for sp in kernel.source_params
                if sp.name == p.name):
        value = value.view(np.uint16)  # __half memory (or a c10::Half accessor's data): its bits
    if value.dtype != want:
        raise UserError(f"{_what(kernel, p, ptype)} must have dtype {want}, got {value.dtype}", p.loc)
    if not value.flags.c_contiguous:
        raise UserError(f"{_what(kernel, p, ptype)} must be C-contiguous (pass np.ascontiguousarray(arr))", p.loc)
    return value if value.ndim == 1 else value.reshape(-1)  # a view: stores land in the caller's array


def is_void_pointer(ctype: str) -> bool:
    """Whether a kernel parameter's C type (``SourceParam.ctype``) is ``void*`` (the frontend
    spells such a parameter canonically: ``void *``, ``const void *``, ``void *__restrict``)."""
    words = ctype.replace("*", " * ").split()
    return [w for w in words if w not in ("const", "volatile", "__restrict", "__restrict__", "restrict")] == \
        ["void", "*"]


def _scalar(kernel: n.Kernel, p: n.Param, ptype: ScalarType, value: Any) -> np.generic:
    exact = ptype.dtype.type
    # The common cases first (this runs for every scalar of every launch).
    if type(value) is exact:
        return value
    if type(value) is int and ptype.is_int:
        if wrap_int(value, ptype) != value:
            raise _out_of_range(kernel, p, ptype, value)
        return exact(value)
    if type(value) is float and ptype.is_float:
        return exact(value)  # np.float32(x) rounds as normalize_value does
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise UserError(f"{_what(kernel, p, ptype)} must be a number, got an array", p.loc)
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        value = bool(value)
    elif isinstance(value, numbers.Integral):
        value = int(value)
    elif isinstance(value, numbers.Real):
        value = float(value)
        if ptype.is_int and not value.is_integer():
            raise UserError(f"{_what(kernel, p, ptype)} must be an integer, got {value!r}", p.loc)
    else:
        raise UserError(f"{_what(kernel, p, ptype)} must be a number, got {type(value).__name__}", p.loc)
    if ptype.is_int and wrap_int(int(value), ptype) != value:
        raise _out_of_range(kernel, p, ptype, value)
    if ptype.is_float and isinstance(value, int) and not isinstance(value, bool):
        try:
            float(value)
        except OverflowError:
            raise _out_of_range(kernel, p, ptype, value) from None
    return exact(normalize_value(value, ptype))


def _out_of_range(kernel: n.Kernel, p: n.Param, ptype: ScalarType, value: int | float) -> UserError:
    """A number the parameter's C type cannot hold: refused, as NumPy refuses ``np.int32(2**32)``
    (C would wrap it silently, or make it inf, which is never what a caller meant)."""
    if ptype.is_int:
        lo, hi = -(1 << (ptype.bits - 1)) if ptype.is_signed else 0, (1 << (ptype.bits - ptype.is_signed)) - 1
        holds = f"{lo}..{hi}"
    else:
        holds = f"at most {float(np.finfo(ptype.dtype).max):g} in magnitude"
    shown = repr(value) if len(repr(value)) <= 24 else f"an integer of {int(value).bit_length()} bits"
    return UserError(f"{_what(kernel, p, ptype)} does not fit in {ptype.c_name}: got {shown} "
                     f"({ptype.c_name} holds {holds})", p.loc)
