"""How the backends lay out a block's scratch buffers of constant shape (``scratch_dims``)."""
from __future__ import annotations

from polypy.ir import nodes as n

# A per-thread array (``[e][tz][ty][tx]``: element ``e`` of every thread of the block) whose
# elements lie a multiple of SET_STRIDE_BYTES apart puts all of one thread's elements in the same
# few sets of the L1 cache (4 KiB apart: one set), which a scalar loop over the threads, reading a
# thread's elements one after the other, pays in conflict misses: a warp matrix fragment's 16 to 64
# elements, 2 or 4 KiB apart in a block of 512 threads (tf32TensorCoreGemm 6.7x slower).
SET_STRIDE_BYTES = 1024
CACHE_LINE_BYTES = 64


def scratch_dims(b: n.Buffer) -> tuple[int, ...] | None:
    """The extents a block-private buffer of constant shape is declared with in C: its own, the
    last one padded for a per-thread (``local``) array whose first dimension's stride is a multiple
    of ``SET_STRIDE_BYTES``, so that the stride grows by at least a cache line and the elements
    spread over the cache's sets. Only the declaration and the allocation change: every access
    subscripts each dimension (the C backend's ``Layout`` kind ``array``; the LLVM backend
    linearizes with these extents), in bounds of the IR's extents."""
    if b.shape is None or not all(isinstance(d, n.Const) for d in b.shape):
        return None
    dims = tuple(int(d.value) for d in b.shape)  # type: ignore[attr-defined]
    if b.space != "local" or len(dims) < 2:
        return dims
    size = b.elem.itemsize
    stride = size
    for d in dims[1:]:
        stride *= d
    if stride == 0 or stride % SET_STRIDE_BYTES:
        return dims
    row = size
    for d in dims[1:-1]:
        row *= d
    pad = max(1, -(-CACHE_LINE_BYTES // row))
    return dims[:-1] + (dims[-1] + pad,)
