"""Host loops of launches run in one OpenMP parallel region (``polypy.ir.host.LoopMerge``,
decided by ``frontend.merge_loops``): the text put around such a loop.

::

    {   /* polypy: ... */
        auto* polypy_keep_A = &A;                      (each variable the loop assigns that was
    #pragma omp parallel firstprivate(A)                declared before it: every thread its own)
        {   polypy_rt_team_scope polypy_team;          (this thread's launches share each grid)
            for (...) { ... k<<<g, b>>>(A) ... }       (as written; the launches become K_launch)
            if (polypy_rt_team_leader()) *polypy_keep_A = A;   (the values after the loop)
        }
    }

A launcher called in the region (``c_launcher.j2``) runs an orphaned ``omp for`` over the grid's
blocks and a barrier instead of its own parallel region.
"""
from __future__ import annotations

import os

from polypy.ir.host import HostFile, LoopMerge


def merged_loop_edits(hf: HostFile, *, threads: int = 0) -> list[tuple[int, int, str]]:
    """The insertions (empty spans) before and after each merged loop of ``hf``; ``threads``:
    the region's OpenMP threads (``--threads``; 0: the runtime's default), as every launcher's."""
    edits: list[tuple[int, int, str]] = []
    for loop in hf.loops:
        if not loop.merged:
            continue
        edits.append((loop.start, loop.start, _before(loop, hf.text, threads)))
        edits.append((loop.end, loop.end, _after(loop, hf.text)))
    return edits


def _indent(loop: LoopMerge, text: str) -> str:
    line_start = text.rfind("\n", 0, loop.start) + 1
    head = text[line_start:loop.start]
    return head if not head.strip() else ""


def _before(loop: LoopMerge, text: str, threads: int) -> str:
    pad = _indent(loop, text)
    where = f" ({os.path.basename(loop.loc.file)}:{loop.loc.line})" if loop.loc is not None else ""
    lines = [f"{{ /* polypy: this host loop{where} runs in one parallel region: every thread runs its scalar host "
             f"code, each launch shares its grid among the team and ends at a barrier */"]
    lines += [f"{pad}auto* polypy_keep_{v} = &{v};" for v in loop.private]
    private = f" firstprivate({', '.join(loop.private)})" if loop.private else ""
    team = f" num_threads({threads})" if threads > 0 else ""
    lines += [f"#pragma omp parallel{team}{private}", f"{pad}{{ polypy_rt_team_scope polypy_team;", pad]
    return "\n".join(lines)


def _after(loop: LoopMerge, text: str) -> str:
    pad = _indent(loop, text)
    back = " ".join(f"*polypy_keep_{v} = {v};" for v in loop.private)
    lines = [""]
    if back:
        lines.append(f"{pad}if (polypy_rt_team_leader()) {{ {back} }}")
    lines.append(f"{pad}}} }}")
    return "\n".join(lines)
