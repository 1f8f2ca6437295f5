"""What a launch through the Python API is checked against before it runs (``polypy.driver.api``).

``ArrayChecks``: what the argument binder does not check but compiled code relies on (alignment,
writability, no overlap where the code assumes none), once per launch. ``Proof``: per launch
shape and integer arguments, what isl says about each array's accesses (``polypy.poly.footprint``):
in bounds (the fast code runs), certainly outside (``refuse``: the launch is refused before it
starts), or unknown (the bounds-checked code runs).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType
from polypy.launch import c_name

if TYPE_CHECKING:
    from polypy.driver.api import CompiledKernel, Launch


class ArrayChecks:
    """What the binder does not check but compiled code relies on: alignment, writability, no
    overlap where the code assumes none (``__restrict__`` pairs, the module's own arrays).

    The pointer parameters and the pairs that must not overlap are worked out once per kernel;
    messages are built only for a failure (this runs on every launch)."""

    def __init__(self, kernel: n.Kernel):
        self.kernel = kernel
        self.pointers = [p for p in kernel.params if isinstance(p.ptype, PointerType)]
        self.writable = [p for p in self.pointers if not p.ptype.const]
        self.pairs = [(p, q) for i, p in enumerate(self.pointers) for q in self.pointers[i + 1:]
                      if (p.ptype.restrict or q.ptype.restrict) and not (p.ptype.const and q.ptype.const)]
        # a gradient's shadows and primal arguments (``Kernel.disjoint``): never the same storage
        named = {p.name: p for p in self.pointers}
        self.disjoint = [(named[a], named[b]) for a, b in kernel.disjoint if a in named and b in named]

    def what(self, p: n.Param) -> str:
        return f"argument {c_name(self.kernel, p.name)!r} of kernel {self.kernel.name!r}"

    def check(self, arrays: Mapping[str, np.ndarray], globals_: Mapping[str, np.ndarray]) -> None:
        for p in self.pointers:
            arr = arrays[p.name]
            if not arr.flags.aligned:
                raise UserError(f"{self.what(p)} is not aligned to its element size (pass a copy: arr.copy())", p.loc)
            for g, storage in globals_.items():
                if np.may_share_memory(arr, storage):
                    raise UserError(f"{self.what(p)} is the module's own __constant__/__device__ array {g!r}; "
                                    f"pass a copy", p.loc)
        for name, align, loc in self.kernel.aligned:
            arr = arrays.get(name)
            if arr is not None and arr.ctypes.data % align:
                # Views are checked from the argument's start; one that starts off the view's
                # alignment would fault on a GPU wherever the offsets do not make up for it.
                raise UserError(f"{self.what(self.kernel.param(name))} is at an address that is not a multiple of "
                                f"{align} bytes, which this view of it needs: polypy does not support such an "
                                f"argument (on a GPU, an access here at an aligned offset faults with 'misaligned "
                                f"address'); pass an aligned array", loc)
        for p in self.writable:
            if not arrays[p.name].flags.writeable:
                raise UserError(f"{self.what(p)} is read-only, but the parameter ({p.ptype}) is not const", p.loc)
        for p, q in self.pairs:
            if np.may_share_memory(arrays[p.name], arrays[q.name]):
                raise UserError(f"arguments {c_name(self.kernel, p.name)!r} and {c_name(self.kernel, q.name)!r} of "
                                f"kernel {self.kernel.name!r} overlap, but one of them is __restrict__", p.loc)
        for p, q in self.disjoint:
            if np.may_share_memory(arrays[p.name], arrays[q.name]):
                raise UserError(f"arguments {c_name(self.kernel, p.name)!r} and {c_name(self.kernel, q.name)!r} of "
                                f"kernel {self.kernel.name!r} overlap: a gradient's shadow must be storage of its "
                                f"own, apart from every primal argument", p.loc)


def original_name(name: str, kernel: n.Kernel) -> str:
    """The shared array of ``kernel`` that ``name`` (a buffer of its coarse kernel: the
    partial block's copy ``s_1`` of ``s``) stands for; ``name`` itself when there is none."""
    if kernel.buffer(name) is not None:
        return name
    base, _, suffix = name.rpartition("_")
    if suffix.isdigit() and base and kernel.buffer(base) is not None:
        return base
    return name


@dataclasses.dataclass(frozen=True)
class ArrayProof:
    """What isl says about the accesses of one array in one launch.

    ``lo``/``hi``: sound bounds of every index used (None: unbounded); ``exact``: both are
    certainly used; ``certain``: accesses that certainly use their range's bounds (each one
    ``(lo, hi, kind, loc)``), which prove a launch wrong when they fall outside the array.
    ``extent``: the array's element count when it does not depend on the arguments (a static
    shared array); ``itemsize`` for the dynamic shared one (extent ``shmem // itemsize``).
    """

    name: str
    space: str  # "global" | "shared" | "dynamic" (the extern __shared__ array)
    lo: int | None
    hi: int | None
    exact: bool
    certain: tuple[tuple[int, int, str, Any], ...]
    extent: int | None = None
    itemsize: int = 1

    def size(self, arrays: Mapping[str, np.ndarray], shmem: int) -> int | None:
        if self.space == "global":
            arr = arrays.get(self.name)
            return None if arr is None else arr.size
        if self.space == "dynamic":
            return shmem // self.itemsize
        return self.extent


@dataclasses.dataclass(frozen=True)
class Proof:
    """Per array (pointer parameters, shared arrays) of a launch shape and integer arguments,
    what ``check`` needs to prove a launch in bounds, prove it out of bounds, or leave it to the
    bounds-checked code. ``arrays`` None: isl could not model the kernel (check everything)."""

    arrays: tuple[ArrayProof, ...] | None
    everything: frozenset[str]  # what the bounds-checked code checks when nothing is proven
    # The arrays isl modelled (touched or not); an array of the CPU form outside it (one
    # gpu2cpu renamed, say) is never proven.
    modeled: frozenset[str] = frozenset()
    # (copy, original) shared arrays of the CPU form (``Kernel.copies``): proven with the original.
    copies: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def of(kernel: CompiledKernel, grid: tuple[int, int, int], block: tuple[int, int, int],
           ints: dict[str, int]) -> Proof:
        cpu = kernel.cpu
        everything = checkable_arrays(cpu)
        if kernel.gpu is None:
            return Proof(None, everything)
        from polypy.poly.footprint import footprint

        try:
            footprints = footprint(kernel.gpu, grid, block, ints, shared=True)
        except UserError:
            return Proof(None, everything)  # a kernel isl cannot model: check every access
        arrays = []
        for name, fp in footprints.items():
            t = fp.touched
            if t is None:
                continue
            certain = tuple((a.range.lo, a.range.hi, a.kind, a.loc) for a in fp.accesses if a.range.exact)
            space, extent, itemsize = fp.space, None, 1
            buf = kernel.gpu.buffer(name)
            if space == "shared" and buf is not None:
                itemsize = buf.elem.itemsize
                if buf.shape is None:
                    space = "dynamic"
                elif all(isinstance(d, n.Const) for d in buf.shape):
                    extent = 1
                    for d in buf.shape:
                        extent *= int(d.value)  # type: ignore[attr-defined]
            arrays.append(ArrayProof(name, space, t.lo, t.hi, t.exact, certain, extent, itemsize))
        return Proof(tuple(arrays), everything, frozenset(footprints), cpu.copies)

    def check(self, launch: Launch, arrays: Mapping[str, np.ndarray]) -> frozenset[str]:
        """The arrays this launch must bounds-check (empty: it is proven in bounds); raises a
        ``UserError`` before the launch if isl proves an access outside its array."""
        if self.arrays is None:
            return self.everything
        unproven = []
        for a in self.arrays:
            size = a.size(arrays, launch.shmem)
            if size is None:
                unproven.append(a.name)
                continue
            if a.lo is not None and a.hi is not None and 0 <= a.lo and a.hi < size:
                continue
            for lo, hi, kind, loc in a.certain:
                if lo < 0 or hi >= size:
                    refuse(launch, a, size, lo if lo < 0 else hi, kind, loc)
            unproven.append(a.name)
        if not set(unproven) <= self.everything:  # names the CPU form does not have: check all
            return self.everything
        proven = {copy for copy, original in self.copies if original in self.modeled and original not in unproven}
        return frozenset(unproven) | (self.everything - self.modeled - proven)


def checkable_arrays(cpu: n.Kernel) -> frozenset[str]:
    """The arrays a launch of CPU-form ``cpu`` may bounds-check (IR names): its pointer parameters
    and shared arrays. A split extern shared array (``Buffer.part``) is checked by the name of the
    array it views; the block function's own copies (``Buffer.frame``) are read at the indices
    they were filled at."""
    return frozenset([p.name for p in cpu.params if isinstance(p.ptype, PointerType)]
                     + [b.symbol if b.part is not None else b.name for b in cpu.buffers
                        if b.space == "shared" and not b.frame])


def refuse(launch: Launch, a: ArrayProof, size: int, index: int, kind: str, loc: Any) -> None:
    """Raise the error for a launch isl proves to access ``index`` of ``a`` (of ``size`` elements)."""
    kernel = launch.kernel.signature
    verb = "reads" if kind == "read" else "writes"
    if a.space == "global":
        what = f"argument {c_name(kernel, a.name)!r} of kernel {kernel.name!r}"
        if index < 0:
            raise UserError(f"{what}: this launch accesses index {index}, before the start of the array", loc)
        hi = a.hi if a.exact and a.hi is not None else index
        at_least = "" if a.exact else "at least "
        raise UserError(f"{what} is too small for this launch: it needs {at_least}{hi + 1} elements (indices up "
                        f"to {hi}), got an array of {size}", loc)
    if a.space == "dynamic" and index >= 0:
        exact = a.exact and a.hi is not None
        need = ((a.hi if exact else index) + 1) * a.itemsize  # type: ignore[operator]
        raise UserError(f"kernel {kernel.name} uses {'' if exact else 'at least '}{need} bytes of dynamic shared "
                        f"memory (it {verb} index {index} of '{a.name}'), launched with {launch.shmem}", loc)
    what = "dynamic shared array" if a.space == "dynamic" else "shared array"
    raise UserError(f"kernel {kernel.name} {verb} index {index} of {what} '{a.name}' of {size} elements "
                    f"with block {launch.block}", loc)
