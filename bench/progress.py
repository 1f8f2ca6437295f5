"""Progress on stderr while a benchmark runs: one line per step, built up as the step goes.

    [3/15] conv2d: stream 44.6 GB/s; omp ok, numpy ok, polypy-llvm ok; timing ... done (4.2 s, 37 s in all)

Each piece is flushed as soon as it is known, so a slow step shows where it is; the line ends
when the step does. The tables go to stdout only at the end, so the two never interleave.
``Progress(enabled=False)`` (``--quiet``) writes nothing.
"""
from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, *, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.index = 0
        self._t0 = time.perf_counter()
        self._step_t0 = self._t0
        self._open = False  # a step's line has been started and not ended

    def _write(self, text: str) -> None:
        if self.enabled:
            self.stream.write(text)
            self.stream.flush()

    def start(self, name: str) -> None:
        """Begin the next step's line: ``[i/total] name:``."""
        if self._open:
            self.end("")
        self.index += 1
        self._step_t0 = time.perf_counter()
        self._open = True
        self._write(f"[{self.index}/{self.total}] {name}:")

    def note(self, text: str) -> None:
        """Add a piece to the current step's line (or, outside a step, a line of its own)."""
        if self._open:
            self._write(f" {text}")
        else:
            self.line(text)

    def end(self, text: str = "ok") -> None:
        """Finish the current step's line, with its time and the time since the start."""
        now = time.perf_counter()
        tail = f" {text}" if text else ""
        self._write(f"{tail} ({now - self._step_t0:.1f} s, {now - self._t0:.0f} s in all)\n")
        self._open = False

    def line(self, text: str) -> None:
        """A line outside the numbered steps (a STREAM measurement at the end, the output paths)."""
        if self._open:
            self.end("")
        self._write(text + "\n")
