"""The per-term work of a long expression (issue 35 item 7: a 100,000-term sum through
``translate`` and ``--emit llvm``): work done on every node of a kernel that decides or changes
nothing is counted here (never timed), on small sums. tests/test_deep_input.py holds the deep
and long input's correctness cases."""
from __future__ import annotations

import inspect

from deepgen import long_sum, nested_fors

from polypy.driver.cli import main


def _counted(monkeypatch, module, name: str, run) -> int:
    """How often ``module.name`` is called while ``run()`` runs."""
    count = [0]
    original = getattr(module, name)

    def counting(*args, **kwargs):
        count[0] += 1
        return original(*args, **kwargs)

    assert not inspect.isgeneratorfunction(original)
    with monkeypatch.context() as m:
        m.setattr(module, name, counting)
        run()
    return count[0]


def _translate(tmp_path, source: str, name: str, *args: str):
    def run() -> None:
        path = tmp_path / f"{name}.cu"
        path.write_text(source)
        assert main(["translate", str(path), *args, "-o", str(tmp_path / f"{name}.out")]) == 0

    return run


def test_thread_loops_without_loops_inside_are_not_planned(tmp_path, monkeypatch) -> None:
    """sink_thread_loops sinks serial loops out of a loop over tx; its plan substituted and
    walked the whole body of every loop over tx (a 100,000-term sum: 6 s CPU) to find none.
    A body with no loop is left as it is without a plan; a body with one is still planned."""
    import gpu2cpu.sink_thread_loops as sink

    assert _counted(monkeypatch, sink, "_Plan", _translate(tmp_path, long_sum(50), "sum")) == 0  # was 1
    assert _counted(monkeypatch, sink, "_Plan", _translate(tmp_path, nested_fors(2), "fors")) > 0
