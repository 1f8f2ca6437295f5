"""What the evaluator and the executor share while running one chunk of blocks."""
from __future__ import annotations

from typing import Callable

import numpy as np

from polypy.emulator.fences import Publications
from polypy.emulator.grid import Chunk
from polypy.emulator.memory import Memory
from polypy.emulator.races import Sites
from polypy.errors import InternalError
from polypy.ir import nodes as n

Value = np.ndarray | np.generic


# A texture fetch: (obj, op, ix, x, y, z, layer, comp) -> the component's value (``polypy.ir.textures``).
TextureFetch = Callable[[int, int, int, float, float, float, int, int], float]


class ChunkState:
    """The chunk's threads, its buffers, and the variables of its lanes.

    ``env`` maps a variable to a chunk-wide vector (one entry per lane) or, while every lane
    holds the same value, to a NumPy scalar: parameters, and loop counters such as a tree
    reduction's ``stride``, stay scalars and cost nothing per lane.
    """

    def __init__(self, chunk: Chunk, memories: dict[str, Memory], scalars: dict[str, np.generic], sites: Sites,
                 pubs: Publications | None = None, textures: TextureFetch | None = None):
        self.chunk = chunk
        self.textures = textures  # the program's texture fetch (``emulate``); None: fetches are refused
        self.pubs = pubs  # fences order blocks (``fences``); None when the kernel has none
        self.memories = memories
        self.sites = sites
        self.env: dict[str, Value] = dict(scalars)

    def memory(self, name: str, node: n.Node) -> Memory:
        mem = self.memories.get(name)
        if mem is None:
            raise InternalError(f"emulator: unknown buffer {name!r}", node.loc)
        return mem
