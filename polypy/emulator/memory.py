"""Buffers as the emulator sees them: storage, addressing, bounds checks, initial contents.

Every buffer is one flat NumPy array plus a logical shape per *instance*:

* ``grid`` scope -- one instance for the launch: pointer parameters (the caller's array, used
  in place) and module globals (``constant``/``device``);
* ``block`` scope -- shared memory, one instance per block of the chunk;
* ``thread`` scope -- local arrays, one instance per lane.

Element ``(i, j)`` of the instance of lane ``l`` lives at ``instance(l) * stride + i*d1 + j``.
Every index is checked against its extent before any memory is touched.

Memory CUDA leaves uninitialized (shared, local, uninitialized variables) is filled with a
recognizable value instead of zeros, so a kernel that reads it fails its tests visibly: NaN for
floats, the largest value for integers, true for bools. ``extern`` shared memory, whose bytes
several element types may view, holds the 32-bit word 0x7FFFFFFF repeated: NaN as f32 and f64,
INT_MAX as i32.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Mapping

import numpy as np

from polypy.emulator.faults import LaneFault, first_true
from polypy.emulator.grid import Chunk, Geometry
from polypy.emulator.lanes import LaneSet
from polypy.emulator.races import AccessRecords
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.semantics import eval_binary, eval_cast
from polypy.ir.types import PointerType, ScalarType
from polypy.ir.visitor import walk

GARBAGE_WORD = 0x7FFFFFFF


def garbage(dtype: np.dtype, count: int) -> np.ndarray:
    """``count`` uninitialized elements of ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.ones(count, dtype=bool)
    if dtype.kind == "f":
        return np.full(count, np.nan, dtype=dtype)
    return np.full(count, np.iinfo(dtype).max, dtype=dtype)


def garbage_bytes(count: int) -> np.ndarray:
    """``count`` uninitialized bytes, for memory viewed with several element types."""
    words = np.full(-(-count // 4), GARBAGE_WORD, dtype="<u4")
    return words.view(np.uint8)[:count].copy()


@dataclasses.dataclass(eq=False)
class Memory:
    name: str
    elem: ScalarType
    shape: tuple[int, ...]
    scope: str  # "grid" | "block" | "thread"
    storage: np.ndarray
    stride: int = 0  # elements between instances (block and thread scope)
    writable: bool = True
    records: AccessRecords | None = None  # None: not race-checked (local memory, checks off)
    record_offset: int = 0  # where this buffer starts inside its records (aliased pointers)
    is_pointer: bool = False
    space: str = "global"  # for messages: global, shared, local, constant, device
    # Shared memory: which storage elements some thread has stored to (None: not tracked).
    # ``extern`` buffers share one byte array and so one mask of bytes, ``written_unit`` per element.
    written: np.ndarray | None = None
    written_unit: int = 1

    def address(self, index: list[np.ndarray | np.generic], lanes: LaneSet, chunk: Chunk,
                access: str) -> np.ndarray:
        """Flat storage positions (one per active lane) of ``self[index...]``; checks bounds."""
        flat: np.ndarray | np.generic = np.int64(0)
        for dim, (value, extent) in enumerate(zip(index, self.shape)):
            i = np.asarray(value).astype(np.int64)  # u64 beyond 2**63 turns negative: caught below
            bad = (i < 0) | (i >= extent)
            if np.any(bad):
                p = first_true(bad)
                raise LaneFault(self._bounds_message(index, p, dim, access), p)
            flat = flat * extent + i
        if self.scope == "block":
            return lanes.take_cached("lane_block", chunk.lane_block) * self.stride + flat
        if self.scope == "thread":
            return lanes.ids * self.stride + flat
        return np.broadcast_to(flat, (lanes.count,)) if np.ndim(flat) == 0 else flat

    def check_written(self, flat: np.ndarray, index: list[np.ndarray | np.generic], access: str) -> None:
        """Refuse to read elements no thread of the block has stored to (``flat`` from ``address``).

        CUDA leaves shared memory uninitialized at the start of each block, so such a read sees
        whatever the previous block left there: undefined, and a kernel bug.
        """
        if self.written is None or len(flat) == 0:
            return
        done = self._written_positions(flat)
        ok = self.written[done[0]]
        for more in done[1:]:
            ok = ok & self.written[more]
        if bool(np.all(ok)):
            return
        p = first_true(np.logical_not(ok))
        shown = self.format_index(index, p)
        raise LaneFault(f"{access} uninitialized shared memory {shown}: no thread of the block has stored to it "
                        f"({self.space} buffer {self.name}{_shape_text(self.shape)})", p)

    def mark_written(self, flat: np.ndarray) -> None:
        if self.written is None:
            return
        for positions in self._written_positions(flat):
            self.written[positions] = True

    def _written_positions(self, flat: np.ndarray) -> list[np.ndarray]:
        if self.written_unit == 1:
            return [flat]
        base = flat * self.written_unit
        return [base + k for k in range(self.written_unit)]

    def _bounds_message(self, index: list[np.ndarray | np.generic], p: int, dim: int, access: str) -> str:
        shown = self.format_index(index, p)
        value = int(np.asarray(index[dim]).reshape(-1)[p if np.ndim(index[dim]) else 0])
        if self.is_pointer:
            return f"out-of-bounds {access} {shown}: {self.name} has {self.shape[0]} elements"
        where = f" in dimension {dim + 1}" if len(self.shape) > 1 else ""
        return (f"out-of-bounds {access} {shown}: index {value}{where} is outside [0, {self.shape[dim]}) "
                f"({self.space} buffer {self.name}{_shape_text(self.shape)})")

    def format_index(self, index: list[np.ndarray | np.generic], p: int) -> str:
        parts = []
        for value in index:
            v = np.asarray(value)
            parts.append(f"[{v.reshape(-1)[p] if v.ndim else v[()]}]")
        return self.name + "".join(parts)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "".join(f"[{d}]" for d in shape)


# --------------------------------------------------------------------------- building

def static_extent(expr: n.Expr, geometry: Geometry, buffer: n.Buffer) -> int:
    """The value of a buffer extent: constants, launch dimensions, integer arguments (a tape
    sized at launch) and arithmetic, comparisons and selections on them."""
    indices = sorted({(type(x).__name__, x.dim) for x in walk(expr) if isinstance(x, (n.ThreadIdx, n.BlockIdx))})
    if indices:  # a per-thread extent (a tape of a loop whose trip count depends on the thread): the largest
        return _largest_extent(expr, geometry, buffer, indices)
    value = _fold(expr, geometry)
    if value is None or isinstance(value, float) or int(value) < 0:
        raise UserError(f"extent of buffer {buffer.name!r} must be a non-negative constant", buffer.loc)
    return int(value)


MAX_EXTENT_POINTS = 1 << 16  # thread/block index combinations an emulated per-thread extent is folded at


def _largest_extent(expr: n.Expr, geometry: Geometry, buffer: n.Buffer, indices: list[tuple[str, int]]) -> int:
    """The largest value of ``expr`` over the thread and block indices it reads (each combination
    folded; emulated launches are small)."""
    ranges = [range(geometry.block[d] if kind == "ThreadIdx" else geometry.grid[d]) for kind, d in indices]
    if int(np.prod([len(r) for r in ranges], dtype=np.int64)) > MAX_EXTENT_POINTS:
        raise UserError(f"extent of buffer {buffer.name!r} depends on more than {MAX_EXTENT_POINTS} thread and "
                        f"block indices of this launch: too many for the emulator", buffer.loc)
    best = 0
    for point in itertools.product(*ranges):
        value = _fold(expr, geometry, dict(zip(indices, point)))
        if value is None or isinstance(value, float) or int(value) < 0:
            raise UserError(f"extent of buffer {buffer.name!r} must be a non-negative constant", buffer.loc)
        best = max(best, int(value))
    return best


def _fold(e: n.Expr, geometry: Geometry, index: Mapping[tuple[str, int], int] | None = None) -> int | float | bool | None:
    if isinstance(e, n.Const):
        return e.value
    if isinstance(e, (n.ThreadIdx, n.BlockIdx)):
        return None if index is None else index.get((type(e).__name__, e.dim))
    if isinstance(e, n.Var):
        return dict(geometry.scalars).get(e.name)
    if isinstance(e, n.Select):
        c = _fold(e.cond, geometry, index)
        return None if c is None else _fold(e.a if c else e.b, geometry, index)
    if isinstance(e, n.BlockDim):
        return geometry.block[e.dim]
    if isinstance(e, n.GridDim):
        return geometry.grid[e.dim]
    if isinstance(e, n.Cast):
        x = _fold(e.x, geometry, index)
        return None if x is None else eval_cast(x, e.x.type, e.to)
    if isinstance(e, n.Binary):
        a, b = _fold(e.a, geometry, index), _fold(e.b, geometry, index)
        return None if a is None or b is None else eval_binary(e.op, a, b, e.a.type)
    return None


def pointer_memories(kernel: n.Kernel, arrays: Mapping[str, np.ndarray], track: bool) -> dict[str, Memory]:
    """The pointer parameters, aliased arguments sharing race records (``k(x, x)``)."""
    out: dict[str, Memory] = {}
    spans = []
    for p in kernel.params:
        if not isinstance(p.ptype, PointerType):
            continue
        arr = arrays[p.name]
        out[p.name] = Memory(p.name, p.ptype.elem, (arr.size,), "grid", arr,
                             writable=bool(arr.flags.writeable), is_pointer=True)
        if arr.nbytes:
            start = arr.__array_interface__["data"][0]
            spans.append((start, start + arr.nbytes, p))
    if not track:
        return out
    spans.sort(key=lambda s: s[0])
    groups: list[list[tuple[int, int, n.Param]]] = []
    for span in spans:
        if groups and span[0] < max(end for _, end, _ in groups[-1]):
            groups[-1].append(span)
        else:
            groups.append([span])
    # Views of records of mixed member types (``frontend``: one IR parameter per member type, all
    # holding the record pointer) overlap one another but touch disjoint bytes: overlapping views
    # are checked per element type.
    views = {name for sp in kernel.source_params if len(sp.members) > 1
             for path, name in sp.members if sum(1 for q, _ in sp.members if q == path) > 1}
    # The pools of pointers read from __constant__ records (``Kernel.held_pointers``) span every
    # allocation those pointers point into, and the gaps between them: they overlap other
    # arguments without touching their bytes, mostly; they too are checked per element type.
    pools = {s.pool for s in kernel.held_pointers}
    split: list[list[tuple[int, int, n.Param]]] = []
    for group in groups:
        if len(group) > 1 and (all(p.name in views for _, _, p in group) or any(p.name in pools for _, _, p in group)):
            for elem in dict.fromkeys(p.ptype.elem for _, _, p in group):
                split.append([s for s in group if s[2].ptype.elem == elem])
        else:
            split.append(group)
    for group in split:
        base = group[0][0]
        end = max(e for _, e, _ in group)
        elem = group[0][2].ptype.elem
        for start, _, p in group:
            if p.ptype.elem != elem or (start - base) % elem.itemsize:
                names = ", ".join(repr(q.name) for _, _, q in group)
                raise UserError(f"pointer arguments {names} overlap in memory with different element types "
                                f"or misaligned; the emulator cannot check such aliasing", p.loc)
        records = AccessRecords((end - base) // elem.itemsize)
        for start, _, p in group:
            out[p.name].records = records
            out[p.name].record_offset = (start - base) // elem.itemsize
    return out


def global_memories(kernel: n.Kernel, geometry: Geometry, given: Mapping[str, np.ndarray] | None,
                    track: bool) -> dict[str, Memory]:
    """``constant``/``device`` buffers: the caller's array if given (in place), else ``init``."""
    out: dict[str, Memory] = {}
    for b in kernel.buffers:
        if b.space not in ("constant", "device"):
            continue
        shape = tuple(static_extent(d, geometry, b) for d in (b.shape or ()))
        size = int(np.prod(shape)) if shape else 1
        if given is not None and b.name in given:
            storage = _given_global(b, given[b.name], size)
        else:
            storage = np.zeros(size, dtype=b.elem.dtype)
            if b.init is not None:
                if len(b.init) > size:
                    raise UserError(f"initializer of {b.name!r} has {len(b.init)} values for {size} elements", b.loc)
                storage[: len(b.init)] = np.array(b.init, dtype=np.float64 if b.elem.is_float else object).astype(
                    b.elem.dtype)
        out[b.name] = Memory(b.name, b.elem, shape, "grid", storage,
                             writable=bool(storage.flags.writeable), space=b.space,
                             records=AccessRecords(size) if track else None)
    return out


def _given_global(b: n.Buffer, arr: object, size: int) -> np.ndarray:
    if not isinstance(arr, np.ndarray):
        raise UserError(f"globals[{b.name!r}] must be a numpy array, got {type(arr).__name__}", b.loc)
    if arr.dtype != b.elem.dtype:
        raise UserError(f"globals[{b.name!r}] has dtype {arr.dtype}, expected {b.elem.dtype} ({b.elem})", b.loc)
    if not arr.flags.c_contiguous:
        raise UserError(f"globals[{b.name!r}] must be C-contiguous", b.loc)
    if arr.size != size:
        raise UserError(f"globals[{b.name!r}] has {arr.size} elements, the buffer has {size}", b.loc)
    return arr.reshape(-1)  # a view: the kernel's writes land in the caller's array


def shared_bytes_per_block(kernel: n.Kernel, geometry: Geometry, shmem: int) -> int:
    total = _round_up(shmem, 8) if any(b.space == "shared" and b.shape is None for b in kernel.buffers) else 0
    for b in kernel.buffers:
        if b.space == "shared" and b.shape is not None:
            total += _count(b, geometry) * b.elem.itemsize
    return total


def local_bytes_per_thread(kernel: n.Kernel, geometry: Geometry) -> int:
    return sum(_count(b, geometry) * b.elem.itemsize for b in kernel.buffers if b.space == "local")


def _count(b: n.Buffer, geometry: Geometry) -> int:
    return int(np.prod([static_extent(d, geometry, b) for d in (b.shape or ())], dtype=np.int64))


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def chunk_memories(kernel: n.Kernel, chunk: Chunk, shmem: int, track: bool) -> dict[str, Memory]:
    """Fresh shared (per block) and local (per lane) buffers for one chunk, garbage-filled.

    All ``extern`` shared buffers start at the same address in CUDA, so they are views of one
    byte array here; extern buffers of one element type also share race records.
    """
    out: dict[str, Memory] = {}
    geometry = chunk.geometry
    nb = chunk.num_blocks
    stride_bytes = _round_up(shmem, 8)
    dynamic = None
    dynamic_written: np.ndarray | None = None
    extern_records: dict[np.dtype, AccessRecords] = {}
    for b in kernel.buffers:
        if b.space == "shared" and b.shape is None:
            if dynamic is None:
                dynamic = garbage_bytes(nb * stride_bytes)
                dynamic_written = np.zeros(nb * stride_bytes, dtype=bool)
            stride = stride_bytes // b.elem.itemsize
            records = None
            if track:
                records = extern_records.setdefault(b.elem.dtype, AccessRecords(nb * stride))
            out[b.name] = Memory(b.name, b.elem, (shmem // b.elem.itemsize,), "block",
                                 dynamic.view(b.elem.dtype), stride=stride, records=records, space="shared",
                                 written=dynamic_written, written_unit=b.elem.itemsize)
        elif b.space == "shared":
            shape = tuple(static_extent(d, geometry, b) for d in b.shape)
            size = int(np.prod(shape, dtype=np.int64))
            out[b.name] = Memory(b.name, b.elem, shape, "block", garbage(b.elem.dtype, nb * size), stride=size,
                                 records=AccessRecords(nb * size) if track else None, space="shared",
                                 written=np.zeros(nb * size, dtype=bool))
        elif b.space == "local":
            shape = tuple(static_extent(d, geometry, b) for d in (b.shape or ()))
            size = int(np.prod(shape, dtype=np.int64)) if shape else 1
            out[b.name] = Memory(b.name, b.elem, shape, "thread", garbage(b.elem.dtype, chunk.num_lanes * size),
                                 stride=size, space="local")
    return out
