"""Plots of saved results: ``python -m bench.plot RESULTS.json [MORE.json ...] [-o OUT.png] [--svg]``.

Reads documents written by ``python -m bench`` and ``python -m bench.grad`` (``bench.jsonfile``)
and draws one figure, a panel per question, kernels along x and a bar per variant, log scale:

* speed relative to the hand-written OpenMP port, t_omp / t_variant (a line at 1: as fast as
  the port), with the geometric mean over the kernels as the last group;
* the same relative to NumPy, t_numpy / t_variant;
* gradient overheads, t_variant / t_fwd per gradient variant (a line at 3x, the rule of thumb
  for reverse mode), from a ``bench.grad`` document or the ``grad`` section of
  ``python -m bench --grad``.

A cell that is not a measurement is marked at the foot of its bar slot (WRONG, skip, ERROR,
refused). matplotlib is optional (the ``bench`` extra): it is imported only here, inside
``draw``, and its absence raises ``PlotUnavailable`` with the install command.
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.jsonfile import read_results  # noqa: E402

INSTALL_HINT = "pip install 'polypy[bench]' (or: pip install matplotlib)"
_MARKS = {"wrong": "WRONG", "skip": "skip", "error": "ERROR", "refused": "refused"}


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


# --------------------------------------------------------------------------- what to draw


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def bench_panel(document: dict[str, Any], key: str, baseline: str) -> dict[str, Any] | None:
    """One panel of a ``bench`` document: ratios ``key`` (``ratio_vs_omp``) per kernel per
    variant other than ``baseline``; None when the run had no such baseline."""
    if baseline not in document["variants"]:
        return None
    variants = [v for v in document["variants"] if v != baseline]
    kernels = [k["kernel"] for k in document["kernels"]]
    values: dict[str, list[float | None]] = {v: [] for v in variants}
    marks: dict[str, list[str | None]] = {v: [] for v in variants}
    for k in document["kernels"]:
        base = k["variants"].get(baseline, {})
        for v in variants:
            entry = k["variants"].get(v, {})
            values[v].append(entry.get(key))
            status = entry.get("status") if entry.get(key) is None else None
            if status == "ok":  # timed, but the baseline was not
                status = f"no {baseline}" if base.get("status") != "ok" else None
            marks[v].append(_MARKS.get(status, status) if status else None)
    return {"kernels": kernels, "variants": variants, "values": values, "marks": marks, "reference": 1.0,
            "ylabel": f"t_{baseline} / t_variant", "title": f"Speed relative to {_BASELINE_NAMES.get(baseline, baseline)}"
            f" (t_{baseline} / t_variant; above 1: faster)"}


_BASELINE_NAMES = {"omp": "the hand-written OpenMP port", "numpy": "NumPy"}


def grad_panel(document: dict[str, Any]) -> dict[str, Any]:
    """The gradient panel of a ``grad`` document: t_variant / t_fwd per kernel per variant."""
    variants = list(document["variants"])
    kernels = [k["kernel"] for k in document["kernels"]]
    values: dict[str, list[float | None]] = {v: [] for v in variants}
    marks: dict[str, list[str | None]] = {v: [] for v in variants}
    for k in document["kernels"]:
        for v in variants:
            entry = k["variants"].get(v)
            if entry is None:
                values[v].append(None)
                marks[v].append("ERROR" if "error" in k else None)
                continue
            values[v].append(entry.get("ratio_vs_fwd"))
            marks[v].append(_MARKS.get(entry["status"], entry["status"]) if entry["status"] != "ok" else None)
    return {"kernels": kernels, "variants": variants, "values": values, "marks": marks, "reference": 3.0,
            "ylabel": "t_variant / t_fwd", "title": "Gradient overhead (t_variant / t_fwd; lower is better, line at 3x)"}


def panels(documents: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The panels to draw and a line of context per document (machine, threads, STREAM)."""
    out: list[dict[str, Any]] = []
    context: list[str] = []
    for doc in documents:
        machine = doc.get("machine", {})
        where = f"{machine.get('cpu', '?')}, {machine.get('threads', '?')} threads"
        if doc["kind"] == "bench":
            context.append(f"python -m bench ({doc.get('size', 'full')} sizes): {where}, "
                           f"STREAM triad {doc['stream']['gbs']:.1f} GB/s, {machine.get('time', '')}")
            for key, baseline in (("ratio_vs_omp", "omp"), ("ratio_vs_numpy", "numpy")):
                panel = bench_panel(doc, key, baseline)
                if panel is not None:
                    out.append(panel)
            if "grad" in doc:
                context[-1] += f"; gradients at {doc['grad'].get('size', 'quick')} sizes"
                out.append(grad_panel(doc["grad"]))
        else:
            context.append(f"python -m bench.grad ({doc.get('size', 'quick')} sizes): {where}, {machine.get('time', '')}")
            out.append(grad_panel(doc))
    return out, context


# --------------------------------------------------------------------------- drawing


def draw(documents: list[dict[str, Any]], path: pathlib.Path, *, svg: bool = False) -> list[pathlib.Path]:
    """Draw ``documents`` into ``path`` (PNG), and next to it an SVG with ``svg``; the paths written."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise PlotUnavailable(f"no plot: matplotlib is not installed ({e}); {INSTALL_HINT}") from None

    todo, context = panels(documents)
    if not todo:
        raise ValueError("nothing to plot: the results hold no timed kernels")
    most = max(len(p["kernels"]) + 1 for p in todo)
    width = max(9.0, 0.75 * most + 2.5)
    fig = Figure(figsize=(width, 3.6 * len(todo) + 0.5), layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle("\n".join(context), fontsize=9)
    for ax, panel in zip(fig.subplots(len(todo), 1, squeeze=False)[:, 0], todo):
        _bars(ax, panel)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = [path]
    fig.savefig(path, dpi=110)
    if svg:
        written.append(path.with_suffix(".svg"))
        fig.savefig(written[-1])
    return written


def _bars(ax: Any, panel: dict[str, Any]) -> None:
    """Grouped bars, one group per kernel plus the geometric mean, on a log axis."""
    kernels, variants = panel["kernels"], panel["variants"]
    groups = kernels + ["geomean"]
    n = max(len(variants), 1)
    width = 0.8 / n
    timed = [x for v in variants for x in panel["values"][v] if x is not None and x > 0]
    low = min(timed + [panel["reference"]]) / 2
    high = max(timed + [panel["reference"]]) * 4  # head room for the legend and the geomean labels
    for i, v in enumerate(variants):
        values = panel["values"][v]
        mean = _geomean([x for x in values if x is not None and x > 0])
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        heights = [x if x is not None and x > 0 else math.nan for x in values] + [mean if mean else math.nan]
        color = f"C{i % 10}"
        bars = ax.bar(xs, [h - low if not math.isnan(h) else math.nan for h in heights], width * 0.95,
                      bottom=low, color=color, label=v)
        bars[-1].set_hatch("//")
        bars[-1].set_edgecolor("white")
        for x, mark in zip(xs, panel["marks"][v] + [None]):
            if mark:
                ax.text(x, low * 1.08, mark, rotation=90, ha="center", va="bottom", fontsize=7, color=color)
        if mean:
            ax.text(xs[-1], mean * 1.05, f"{mean:.2f}", rotation=90, ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylim(low, high)
    _plain_log_labels(ax, decades=math.log10(high / low))
    ax.axhline(panel["reference"], color="black", linewidth=1, linestyle="--")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=30, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.axvline(len(groups) - 1.5, color="grey", linewidth=0.5)
    ax.set_ylabel(panel["ylabel"])
    ax.set_title(panel["title"], fontsize=10)
    ax.grid(axis="y", which="major", alpha=0.4)
    ax.grid(axis="y", which="minor", alpha=0.12)
    ax.legend(fontsize=7, ncol=min(n, 7), loc="upper left")


def _plain_log_labels(ax: Any, *, decades: float) -> None:
    """Tick labels as plain numbers (0.5, 2, 30), minor ones at 2 and 5 when few decades show."""
    from matplotlib.ticker import FuncFormatter

    def major(y: float, _: Any) -> str:
        return f"{y:g}"

    def minor(y: float, _: Any) -> str:
        mantissa = round(y / 10 ** math.floor(math.log10(y)), 6)
        return f"{y:g}" if decades < 3 and mantissa in (2, 5) else ""

    ax.yaxis.set_major_formatter(FuncFormatter(major))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def plot_files(paths: list[pathlib.Path], out: pathlib.Path | None = None, *, svg: bool = False) -> list[pathlib.Path]:
    """Read result files and draw them (default output: the first file with ``.png``)."""
    documents = [read_results(p) for p in paths]
    return draw(documents, out if out is not None else pathlib.Path(paths[0]).with_suffix(".png"), svg=svg)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plot", description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=pathlib.Path,
                        help="JSON files from python -m bench / python -m bench.grad")
    parser.add_argument("-o", "--output", type=pathlib.Path, help="the PNG to write (default: next to the first file)")
    parser.add_argument("--svg", action="store_true", help="also write an SVG next to the PNG")
    opts = parser.parse_args(argv)
    try:
        written = plot_files(opts.results, opts.output, svg=opts.svg)
    except (OSError, ValueError, PlotUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for path in written:
        print(f"plot written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
