"""A tile smaller than a warp in a loop whose trips differ between threads (gpu2cpu/uniform_warp_loops.py).

``cg::reduce(tile16, ...)`` inside a grid-stride loop where some lanes of a tile have left the
loop is undefined in CUDA (a tile's collective needs every thread of the tile); the emulator
says so at run time. The C and LLVM backends took the tile's computed mask for the lanes that
make the call (as a coalesced group's is) and returned the sum over the lanes still in the loop.
Now each such operation is preceded by a check that every lane of the tile arrives: where one has
left the loop the launch stops (a failed device assertion naming it), where none has the result
is exact. A full-warp tile's (constant mask) stays refused, located; a coalesced group's scan or
reduce in such a loop (its mask comes from ``__activemask()``: the lanes that make the call) runs
unchecked (tests/test_partitions.py, tests/test_cg_scan.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from polypy.errors import DeviceAssertError, UserError

TILE_IN_LOOP = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void k(const int* x, int* y, int n) {
  cg::thread_block_tile<TILE> t = cg::tiled_partition<TILE>(cg::this_thread_block());
  int acc = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    acc += cg::reduce(t, x[i], cg::plus<int>());
  }
  y[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""


def _load(tmp_path, tile: int):
    path = tmp_path / "tile_loop.cu"
    path.write_text(TILE_IN_LOOP.replace("TILE", str(tile)))
    return path


@pytest.mark.parametrize("tile", [4, 16])
def test_a_tiles_collective_where_some_lanes_left_the_loop_stops_the_launch(tmp_path, tile) -> None:
    mod = polypy.compile(str(_load(tmp_path, tile)))
    x = np.arange(64, dtype=np.int32)
    # n = 64: every thread runs one trip; the tile sums are exact.
    y = np.zeros(64, np.int32)
    mod.k[(1,), (64,)](x, y, np.int32(64))
    np.testing.assert_array_equal(y, np.repeat(x.reshape(-1, tile).sum(axis=1), tile))
    # n = 38: lanes 38.. of the tile holding thread 36 never enter the loop (undefined in CUDA).
    with pytest.raises(DeviceAssertError, match="every lane of this warp operation's mask reaches it"):
        mod.k[(1,), (64,)](x, np.zeros(64, np.int32), np.int32(38))


def test_a_full_warp_tile_in_such_a_loop_stays_refused(tmp_path) -> None:
    with pytest.raises(UserError) as info:
        polypy.compile(str(_load(tmp_path, 32)))
    message = str(info.value)
    assert "tile_loop.cu:8:3" in message, message
    assert "loop whose trip count depends on the thread" in message, message
