"""tighten-thread-bounds is a list of steps over one state (gpu2cpu.tighten_thread_bounds.STEPS),
and docs/architecture.md names them in the order the code tries them."""
from __future__ import annotations

import pathlib
import re

from gpu2cpu.tighten_thread_bounds import STEPS

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def test_the_documented_steps_are_the_code_s_steps_in_order():
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### Steps inside the schedule passes", 1)[1].split("- `sink-thread-loops`", 1)[0]
    named = [name for name in re.findall(r"`([a-z_]+)`", section)]
    functions = [step.__name__ for _, step in STEPS]
    assert [name for name in named if name in functions] == functions


def test_every_step_is_a_function_of_the_state_and_the_last_always_applies():
    names = [name for name, _ in STEPS]
    assert len(set(names)) == len(names)
    assert names[-1] == "version-conditions"
    for _, step in STEPS:
        assert list(step.__code__.co_varnames[:5]) == ["st", "loop", "facts", "needs", "depth"]
