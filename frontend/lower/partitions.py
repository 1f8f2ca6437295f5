"""Groups of dynamic membership: ``cg::binary_partition`` and ``cg::labeled_partition``.

CUDA's meaning (Programming Guide, "Cooperative Groups", "Group Partitioning"): the parent (a
``thread_block_tile`` of at most 32 threads, or a ``coalesced_group``) is split into coalesced
groups, one per value of the predicate (``binary_partition``) or of the label
(``labeled_partition``); each thread's group is the lanes of its parent whose predicate or label
equals its own. The result is a ``coalesced_group``, so everything polypy runs for coalesced
groups (``thread_rank()`` = the set lanes of the mask below this one, ``size()``, ``shfl``,
``any``/``all``, ``sync()``, ``cg::reduce``) acts within the partition.

The group is its mask of warp lanes, computed from what the IR already runs exactly::

    members = __activemask() & parent_lanes     (the parent's lanes that make the call)
    binary:   b = __ballot_sync(parent_lanes, pred);  mask = pred ? b : members & ~b
    labeled:  mask = the members l whose label (read with one shfl from each member, lowest
              lane first, a non-member lane reading its own) has the bits of this lane's label

CUDA requires every thread of the parent to make the call; the mask is then the parent's
partition exactly. Its ``meta_group_rank()`` is 0 and ``meta_group_size()`` 1, as for
``coalesced_threads()``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, U32

from frontend import ctypes_map as tm
from frontend.arith import convert, truth
from frontend.lower.groups import cg_aggregate, cg_group, cg_linear_tid, cg_tile_mask
from frontend.values import Aggregate

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

WARP = 32
FULL = 0xFFFFFFFF


def dynamic_partition(b: KernelBuilder, name: str, args: list[ci.Cursor], c: ci.Cursor, *, mask_field: str,
                      parent_kind: str, tile_size: int | None) -> Aggregate:
    """``binary_partition(parent, pred)`` or ``labeled_partition(parent, label)`` as a coalesced
    group (``mask_field`` the member holding its lanes)."""
    parent_c, key_c = args
    loc = b.loc(c)
    parent = cg_group(b, parent_c)
    if parent_kind == "coalesced_group":
        lanes = parent.fields[mask_field]
        assert isinstance(lanes, n.Expr)
    elif parent_kind == "thread_block_tile" and tile_size is not None and tile_size <= WARP:
        lanes = cg_tile_mask(b, tile_size)[0]
    else:
        raise b.error(f"cooperative_groups::{name} of a {parent_kind}"
                      f"{f'<{tile_size}>' if tile_size is not None else ''}: CUDA partitions a thread_block_tile of "
                      f"at most {WARP} threads or a coalesced_group", parent_c)
    parent_lanes = b.temp(U32, convert(lanes, U32), "parent_lanes", c)
    pl = n.Var(parent_lanes.name, U32)
    active = b.temp(U32, None, "active", c)
    b.emit(n.Vote(active.name, "activemask", n.Const(True, BOOL), n.Const(FULL, U32), loc=loc))
    members = b.temp(U32, n.Binary("band", n.Var(active.name, U32), pl), "members", c)
    mv = n.Var(members.name, U32)
    if name == "binary_partition":
        pred = b.temp(BOOL, truth(b.scalar(key_c)), "pred", c)
        ballot = b.temp(U32, None, "ballot", c)
        b.emit(n.Vote(ballot.name, "ballot", n.Var(pred.name, BOOL), pl, loc=loc))
        bv = n.Var(ballot.name, U32)
        mask = b.temp(U32, n.Select(n.Var(pred.name, BOOL), n.Binary("band", bv, mv),
                                    n.Binary("band", mv, n.Unary("bnot", bv))), "partition", c)
    else:
        kt = tm.scalar_type(key_c.type)
        if kt is None or kt.is_float or kt == BOOL:
            raise b.error(f"cooperative_groups::labeled_partition with a label of type '{key_c.type.spelling}': "
                          "the label must be an integer", key_c)
        label = b.temp(kt, convert(b.scalar(key_c), kt), "label", c)
        mask = _matching_members(b, n.Var(label.name, kt), mv, c)
    m = n.Var(mask.name, U32)
    size = convert(b.bit_intrinsic("__popc", [m], c), U32)  # type: ignore[attr-defined]
    group = cg_aggregate(b, size, n.Const(0, U32), n.Const(1, U32), c)
    group.fields[mask_field] = m
    return group


def _matching_members(b: KernelBuilder, label: n.Expr, members: n.Var, c: ci.Cursor):
    """The members whose ``label`` has this lane's bits: one shuffle per lane of the warp, from
    that lane when it is a member (from this lane otherwise, unused)::

        for (l = 0; l < 32; ++l) { x = shfl(members, label, in(l) ? l : lane);
                                   if (in(l) && x == label) found |= 1 << l; }
    """
    loc = b.loc(c)
    lane = n.Binary("band", cg_linear_tid(b), n.Const(WARP - 1, U32))
    found = b.temp(U32, n.Const(0, U32), "partition", c)
    x = b.temp(label.type, None, "label_of", c)
    j = b.names.fresh("l")
    jv = n.Var(j, U32)
    member = n.Binary("ne", n.Binary("band", n.Binary("shr", members, jv), n.Const(1, U32)), n.Const(0, U32))
    same = n.Binary("land", member, n.Binary("eq", n.Var(x.name, label.type), label))
    fv = n.Var(found.name, U32)
    body = (
        n.Shuffle(x.name, "idx", label, convert(n.Select(member, jv, lane), I32), n.Const(WARP, I32), members,
                  loc=loc),
        n.If(same, (n.Assign(found.name, n.Binary("bor", fv, n.Binary("shl", n.Const(1, U32), jv)), loc=loc),),
             loc=loc),
    )
    b.emit(n.For(j, U32, n.Const(0, U32), n.Const(WARP, U32), n.Const(1, U32), body, loc=loc))
    return found
