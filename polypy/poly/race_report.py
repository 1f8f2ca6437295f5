"""The race diagnostics of ``translate --report`` (and of ``grad``): stores two threads of a
launch race on (``write_conflicts``), global reads of what another block of the launch stores
(``block_read_races``) and races on shared memory (``block_races``)."""
from __future__ import annotations

import dataclasses

import islpy as isl

from polypy.errors import Loc, format_diagnostic
from polypy.ir import nodes as n
from polypy.ir.host import LaunchSite
from polypy.poly.block_races import shared_race_warnings
from polypy.poly.block_read_races import BlockReadRace, block_read_races
from polypy.poly.model import TooDeepForModel
from polypy.poly.write_conflicts import Shape, WriteConflict, conflicts_in, race_question


@dataclasses.dataclass(frozen=True)
class RaceWarning:
    """One race diagnostic, for ``translate --report`` (``format()`` like the other report entries)."""

    text: str

    def format(self) -> str:
        return self.text


def race_report(module: n.Module) -> list[RaceWarning]:
    """``race_warnings`` as report entries."""
    return [RaceWarning(text) for text in race_warnings(module)]


def kernel_race_warnings(module: n.Module, name: str) -> list[str]:
    """``race_warnings`` of the kernel ``name`` of ``module`` alone (what ``grad`` warns about)."""
    return race_warnings(dataclasses.replace(module, kernels=tuple(k for k in module.kernels if k.name == name)))


def race_warnings(module: n.Module) -> list[str]:
    """``FILE:LINE:COL: warning: ...`` diagnostics for the races of the kernels of ``module``: on
    global stores, on global reads of what another block stores, and on shared memory
    (``polypy.poly.block_races``).

    A whole program's kernels are judged per launch shape of their launch sites (a shape that
    is not a constant is symbolic); other kernels with a symbolic launch. Each store is reported
    once, with a note naming the launch that races when it is a launch site of the program.
    """
    sites: dict[str, list[LaunchSite]] = {}
    if module.host is not None:
        for site in module.host.launches:
            sites.setdefault(site.kernel, []).append(site)
    out: list[str] = []
    seen: set[tuple[str, Loc | None, type]] = set()
    for kernel in module.kernels:
        launches: list[LaunchSite | None] = list(sites.get(kernel.name, ())) or [None]
        shapes: dict[tuple[Shape | None, Shape | None], LaunchSite | None] = {}
        for site in launches:
            key = (site.block_shape, site.grid_shape) if site is not None else (None, None)
            shapes.setdefault(key, site)
        for (block, grid), site in shapes.items():
            try:
                q = race_question(kernel, block, grid)
                conflicts = [*conflicts_in(q), *block_read_races(q)]
            except isl.Error as exc:  # a warning decides nothing: say once that it was not checked, go on
                text = str(exc).strip().splitlines()
                warning = format_diagnostic("warning", f"races on global memory not checked in kernel {kernel.name}: "
                                            "the question is too hard for the polyhedral analysis (isl: "
                                            f"{text[0] if text else 'error'})", kernel.loc)
                conflicts = []
                if warning not in out:
                    out.append(warning)
            except TooDeepForModel as exc:  # said once per kernel; the translation goes on
                out.append(format_diagnostic("warning", f"races not checked: {exc.message}", exc.loc))
                break
            for conflict in conflicts:
                if (kernel.name, conflict.loc, type(conflict)) in seen:
                    continue
                seen.add((kernel.name, conflict.loc, type(conflict)))
                notes = list(_notes(conflict))
                if site is not None and block is not None:
                    notes.append((f"launched here with block ({', '.join(map(str, block))})", site.loc))
                out.append(format_diagnostic("warning", conflict.message(), conflict.loc, notes=tuple(notes)))
            out.extend(w for w in shared_race_warnings(kernel, block=block) if w not in out)
    return out


def _notes(conflict: WriteConflict | BlockReadRace) -> tuple[tuple[str, Loc | None], ...]:
    if isinstance(conflict, BlockReadRace):
        return conflict.notes()
    return (("the other store", conflict.other),) if conflict.other is not None else ()
