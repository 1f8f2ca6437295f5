"""What a variant is: ``Runner``, ``Factory``, ``Skip`` and the thread count ``threads()``.

The ports (``bench.omp_ports``, ``bench.numpy_ports``, ``bench.polypy_variants``) and the harness
import these from here; ``bench.variants`` lists the variants (it imports the ports, which
therefore must not import it).
"""
from __future__ import annotations

import os
from typing import Any, Callable

Runner = Callable[[dict[str, Any]], None]
Factory = Callable[..., Runner]  # (sample: Sample, case: Case) -> Runner


class Skip(Exception):
    """A variant does not (yet) run this sample; the message says why."""


def threads() -> int:
    """The thread count every variant uses: ``OMP_NUM_THREADS``, else all usable cores."""
    value = os.environ.get("OMP_NUM_THREADS")
    if value:
        return int(value.split(",")[0])
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
