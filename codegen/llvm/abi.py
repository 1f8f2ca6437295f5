"""How a compiled kernel is called: the parameters of ``K_blocks``/``K_worker``, status codes,
the fault record of the bounds-checked variant (see ``codegen.llvm.lower``)."""
from __future__ import annotations

import dataclasses
import math

from polypy.errors import Loc
from polypy.ir import nodes as n


GLOBAL_SPACES = ("constant", "device")
SCRATCH_SPACES = ("shared", "local")

# Leading parameters of every K_blocks function, before the kernel's own.
LAUNCH_PARAMS = ("first", "last", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "shmem")
# K_worker's status codes.
STATUS_OUT_OF_MEMORY = 1
STATUS_BOUNDS_FAULT = 2
# i64 words of a bounds-checked kernel's fault record (see the docstring of codegen.llvm.lower).
FAULT_WORDS = 6


@dataclasses.dataclass(frozen=True)
class CheckSite:
    """One bounds-checked access of a kernel: the buffer, how it is accessed, where in the source."""

    buffer: str
    kind: str  # "read" | "write" | "atomic"
    space: str  # "global" (a pointer parameter) | "shared"
    dynamic: bool  # the ``extern __shared__`` array, sized by the launch's dynamic shared bytes
    loc: Loc | None
    # A part ``(p, q)`` of a split extern array (``Buffer.part``; ``buffer`` names the array):
    # index ``i`` of the part is index ``i * q + p`` of the array.
    part: tuple[int, int] | None = None
    itemsize: int = 0  # of the extern array's elements (for its extent in a message)
# Leading parameters of every K_worker function, before the kernel's own.
WORKER_PARAMS = ("next", "total", "chunk", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "shmem")


@dataclasses.dataclass(frozen=True)
class KernelABI:
    """How to call the compiled function of one kernel.

    ``symbol`` (``K_blocks``) takes ``LAUNCH_PARAMS`` (i64, i64, six i32, i64), ``worker_symbol``
    (``K_worker``) takes ``WORKER_PARAMS`` (pointer to an i64 counter, i64, i64, six i32, i64);
    then both take ``params`` (pointers as addresses, scalars by value, ``bool`` as a byte), then
    one pointer per ``globals`` buffer (the storage of a ``constant``/``device`` array); a
    ``bounds_checked`` one then takes the fault record and the extent of each pointer
    parameter. They return 0, 1 if scratch allocation failed, 2 after a bounds fault.
    """

    kernel: str
    symbol: str
    params: tuple[n.Param, ...]
    globals: tuple[n.Buffer, ...]
    worker_symbol: str = ""
    coarsen: tuple[int, int, int] = (1, 1, 1)
    # Bounds-checked variant: the buffers checked and the checked accesses (fault site numbers).
    bounds_checked: bool = False
    checked: frozenset[str] = frozenset()
    sites: tuple[CheckSite, ...] = ()
    # Checked shared arrays of a coarse kernel that have one slice per sub-block (a leading
    # dimension of the coarsening factor): each access is checked against its slice.
    sliced: frozenset[str] = frozenset()

    def block_count(self, grid: tuple[int, int, int]) -> int:
        """How many (coarse) blocks ``first``/``last``/``total`` count for a launch of ``grid``."""
        return math.prod(-(-g // f) for g, f in zip(grid, self.coarsen))


def kernel_abi(kernel: n.Kernel, checked: frozenset[str] | None = None,
               sliced: frozenset[str] = frozenset()) -> KernelABI:
    """The ABI of ``kernel`` (``checked``: of its variant bounds-checking those buffers, ``sliced``
    those of them checked per slice; the sites are filled in by the emitter). Checking a split
    extern shared array (``Buffer.part``, named after the array it views) checks each part."""
    globals_ = tuple(b for b in kernel.buffers if b.space in GLOBAL_SPACES)
    if checked is not None:
        checked = frozenset(checked) | {b.name for b in kernel.buffers if b.part is not None and b.symbol in checked}
    return KernelABI(kernel.name, f"{kernel.name}_blocks", kernel.params, globals_, f"{kernel.name}_worker",
                     kernel.coarsen, bounds_checked=checked is not None, checked=frozenset(checked or ()),
                     sliced=frozenset(sliced) & frozenset(checked or ()))
