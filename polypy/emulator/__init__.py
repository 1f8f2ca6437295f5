"""The reference emulator: runs a GPU-form kernel with exact CUDA/C semantics on NumPy.

Every later stage (gpu2cpu, the code generators, autodiff) is checked against it, so it trades
speed for being obviously right, and it refuses what CUDA leaves undefined: out-of-bounds
accesses, barriers reached by only some threads of a block, shuffles from inactive lanes,
integer division by zero, and (with ``check_races``) data races.

How it runs a launch (see ``launch.emulate``): blocks are grouped into chunks; all threads of a
chunk execute each statement together, as SIMT lanes of NumPy arrays, with a shrinking set of
active lanes for divergent control flow (``lanes.LaneSet``). Modules, one job each:

* ``launch``    -- the public ``emulate``: launch checks, memory set-up, chunking;
* ``arguments`` -- binding and checking the kernel's arguments (arrays, scalars, structs);
* ``grid``      -- launch geometry and per-chunk thread state (coordinates, returned, epochs);
* ``lanes``     -- the active-lane set;
* ``state``     -- what the evaluator and executor share for one chunk (variables, buffers);
* ``ops``       -- C semantics of operators and casts on lane vectors;
* ``mathlib``   -- the math functions, one table keyed by canonical name;
* ``memory``    -- buffers as the emulator sees them, addressing and bounds checks;
* ``races``     -- the data-race detector;
* ``atomics``   -- serialized read-modify-write;
* ``warps``     -- shuffles and votes;
* ``evaluate``  -- expressions; ``execute`` -- statements and control flow;
* ``faults``    -- the lane-level error raised before a source location is known.
"""
from polypy.emulator.launch import emulate

__all__ = ["emulate"]
