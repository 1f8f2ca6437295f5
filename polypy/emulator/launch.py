"""``emulate``: one kernel launch with reference CUDA semantics.

Blocks are independent, so the launch runs them in chunks of consecutive blocks, sized so the
per-lane vectors and the per-block shared memory stay within a budget; every thread of a chunk
runs in one SIMT lane. Global memory and its race records persist across chunks; shared and
local memory are made fresh for each chunk.
"""
from __future__ import annotations

import dataclasses

from typing import Any, Mapping, Sequence

import numpy as np

from polypy.analysis.grid_sync import has_grid_sync
from polypy.emulator.arguments import bind_arguments
from polypy.emulator.execute import Executor
from polypy.emulator.fences import Publications, needs_publications
from polypy.emulator.grid import Chunk, Geometry
from polypy.emulator.memory import (
    chunk_memories, global_memories, local_bytes_per_thread, pointer_memories, shared_bytes_per_block,
)
from polypy.emulator.races import Sites
from polypy.emulator.state import ChunkState, TextureFetch
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.verifier import verify_kernel
from polypy.ir.visitor import walk
from polypy.launch import block_shape, grid_shape
from polypy.stack import on_big_stack

# Lanes per chunk: 2**20 runs a 1M-thread launch (saxpy over 1M elements) as one chunk.
LANE_BUDGET = 1 << 20
# Bytes of per-chunk storage (lane vectors, shared and local memory, their race records).
MEMORY_BUDGET = 1 << 28


@on_big_stack
def refuse_device_launches(kernel: n.Kernel) -> None:
    """Launches from device code (dynamic parallelism) are refused by the emulator, at the launch:
    it runs one kernel at a time and has no other kernel to run after the grid."""
    for x in walk(kernel):
        if isinstance(x, n.Launch):
            raise UserError(f"the emulator does not run kernel launches from device code (dynamic parallelism: "
                            f"'{x.kernel}' launched here); translate the program and run it natively instead",
                            x.loc)


def emulate(kernel: n.Kernel, grid: int | Sequence[int], block: int | Sequence[int],
            args: Mapping[str, Any] | Sequence[Any], *, shmem: int = 0,
            globals: dict[str, np.ndarray] | None = None, check_races: bool = True,
            textures: TextureFetch | None = None) -> None:
    """Run ``kernel<<<grid, block, shmem>>>(args)``; pointer arguments are updated in place.

    ``args`` maps parameter names to values (or lists them in parameter order); see
    ``arguments`` for what each parameter accepts. ``globals`` supplies the contents of
    ``constant``/``device`` buffers by name (used in place, so a kernel's writes to a
    ``__device__`` array are visible to the caller; names this kernel does not use are ignored,
    so one dict can serve every kernel of a module); the others start from their initializer,
    zero-filled. With ``check_races`` a data race is a ``UserError``. ``textures``: what a texture
    fetch returns, ``textures(obj, op, ix, x, y, z, layer, comp)`` (``polypy.ir.textures``; a whole
    program under ``polypy run --emulate`` passes its runtime's); without it a fetch is refused.

    Anything CUDA leaves undefined that the emulator meets (out-of-bounds access, a barrier
    reached by part of a block, a shuffle from an inactive lane, integer division by zero...) is
    a ``UserError`` with the location of the offending node. Stores made before the error stay
    in the caller's arrays, as they would on a device.
    """
    if not isinstance(kernel, n.Kernel):
        raise UserError(f"emulate expects a polypy.ir.Kernel, got {type(kernel).__name__}")
    if kernel.stage != "gpu":
        raise UserError(f"kernel {kernel.name!r} is in {kernel.stage!r} form; the emulator runs GPU-form kernels",
                        kernel.loc)
    verify_kernel(kernel)
    refuse_device_launches(kernel)
    # A grid with no blocks is a launch that does nothing (CUDA refuses its configuration, and a
    # program that does not check the launch's error sees no effect); its arguments are still checked.
    geometry = Geometry(grid_shape(grid, empty=True), block_shape(block))
    if geometry.num_blocks * geometry.threads_per_block >= 1 << 31:
        raise UserError("launch of 2**31 threads or more is beyond the emulator")
    if not isinstance(shmem, (int, np.integer)) or isinstance(shmem, bool) or shmem < 0:
        raise UserError(f"shmem must be a non-negative number of bytes, got {shmem!r}")
    shmem = int(shmem)
    arrays, scalars = bind_arguments(kernel, args)
    integers = tuple((name, int(v)) for name, v in scalars.items()
                     if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)))
    geometry = dataclasses.replace(geometry, scalars=integers)
    if geometry.num_blocks == 0:
        return
    with np.errstate(all="ignore"):
        sites = Sites()
        memories = pointer_memories(kernel, arrays, check_races)
        memories.update(global_memories(kernel, geometry, globals, check_races))
        pubs = Publications(geometry.num_blocks, geometry.num_blocks * geometry.threads_per_block) \
            if check_races and needs_publications(kernel) else None
        # A grid barrier needs every block at once: the whole grid is one chunk (emulator/grid_sync.py).
        per_chunk = geometry.num_blocks if has_grid_sync(kernel) else _blocks_per_chunk(kernel, geometry, shmem)
        for first in range(0, geometry.num_blocks, per_chunk):
            chunk = Chunk(geometry, first, min(per_chunk, geometry.num_blocks - first))
            chunk_mems = dict(memories)
            chunk_mems.update(chunk_memories(kernel, chunk, shmem, check_races))
            Executor(ChunkState(chunk, chunk_mems, scalars, sites, pubs, textures)).run(kernel.body)


def _blocks_per_chunk(kernel: n.Kernel, geometry: Geometry, shmem: int) -> int:
    t = geometry.threads_per_block
    per_block = t * (96 + 4 * local_bytes_per_thread(kernel, geometry)) + 8 * shared_bytes_per_block(
        kernel, geometry, shmem)
    by_lanes = max(1, LANE_BUDGET // t)
    by_memory = max(1, MEMORY_BUDGET // max(per_block, 1))
    return max(1, min(geometry.num_blocks, by_lanes, by_memory))
