"""Which per-thread values to store across thread loops and which to recompute: a minimum cut.

A thread loop may need values that an earlier thread loop computed. Each such value is either
stored in a per-thread buffer, or recomputed from other values -- which must then be stored or
recomputed in turn. Choosing the fewest buffers is a minimum cut in the graph of definitions
(Polygeist's formulation)::

    a = x[i]          (a load: cannot be recomputed)        store {a}: 1 buffer
    b = a * 2.0f      barrier                              instead of {b, c}: 2 buffers
    c = a + 1.0f      ... b ... c ...                      (b and c recomputed from a)

Flow network: source -> a_in for every value that cannot be recomputed; a_in -> a_out with the
cost of storing a; u_out -> v_in for every operand u of v; v_out -> sink for every needed value.
Cut edges a_in -> a_out are the values to store. Storing a value that is needed directly costs
slightly less than storing one of its operands, so that ties avoid recomputation.
"""
from __future__ import annotations

from collections import deque
from typing import Mapping

_INFINITE = 1 << 40
_STORE_NEEDED = 100  # cost of storing a value some thread loop needs
_STORE_OPERAND = 101  # cost of storing a value only to recompute others from it


def choose_stored(needed: set[str], operands: Mapping[str, tuple[str, ...] | None]) -> set[str]:
    """The values to store: the fewest from which every ``needed`` value is stored or recomputable.

    ``operands[v]``: the values ``v`` is recomputed from, or None when ``v`` cannot be recomputed
    (values missing from ``operands`` cannot be recomputed either).
    """
    nodes: list[str] = []
    seen: set[str] = set()
    work = sorted(needed)
    while work:
        v = work.pop()
        if v in seen:
            continue
        seen.add(v)
        nodes.append(v)
        work.extend(operands.get(v) or ())
    # Node numbering: 0 source, 1 sink, then v_in = 2 + 2k, v_out = 3 + 2k.
    index = {v: k for k, v in enumerate(sorted(nodes))}
    size = 2 + 2 * len(index)
    capacity: list[dict[int, int]] = [dict() for _ in range(size)]

    def edge(a: int, b: int, c: int) -> None:
        capacity[a][b] = capacity[a].get(b, 0) + c
        capacity[b].setdefault(a, 0)

    for v, k in index.items():
        v_in, v_out = 2 + 2 * k, 3 + 2 * k
        edge(v_in, v_out, _STORE_NEEDED if v in needed else _STORE_OPERAND)
        ops = operands.get(v)
        if ops is None:
            edge(0, v_in, _INFINITE)
        else:
            for u in ops:
                edge(3 + 2 * index[u], v_in, _INFINITE)
        if v in needed:
            edge(v_out, 1, _INFINITE)
    _max_flow(capacity)
    reachable = _reachable(capacity)
    return {v for v, k in index.items() if 2 + 2 * k in reachable and 3 + 2 * k not in reachable}


def _max_flow(capacity: list[dict[int, int]]) -> None:
    """Edmonds-Karp from node 0 to node 1; leaves the residual capacities in ``capacity``."""
    while True:
        parent = {0: 0}
        queue = deque([0])
        while queue and 1 not in parent:
            a = queue.popleft()
            for b, c in capacity[a].items():
                if c > 0 and b not in parent:
                    parent[b] = a
                    queue.append(b)
        if 1 not in parent:
            return
        path = []
        b = 1
        while b != 0:
            path.append((parent[b], b))
            b = parent[b]
        push = min(capacity[a][b] for a, b in path)
        for a, b in path:
            capacity[a][b] -= push
            capacity[b][a] += push


def _reachable(capacity: list[dict[int, int]]) -> set[int]:
    """Nodes reachable from the source in the residual network (the source side of the cut)."""
    seen = {0}
    queue = deque([0])
    while queue:
        a = queue.popleft()
        for b, c in capacity[a].items():
            if c > 0 and b not in seen:
                seen.add(b)
                queue.append(b)
    return seen
