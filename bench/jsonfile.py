"""Reading and writing result files: one JSON document per run, for ``python -m bench`` and
``python -m bench.grad`` alike.

A document is a dict with ``"schema"`` (the version of this layout) and ``"kind"`` (``"bench"``:
kernels side by side, or ``"grad"``: gradient overheads); a ``bench`` document from
``python -m bench --grad`` also holds a ``"grad"`` section. ``bench.plot`` draws any of them.
Written atomically (temporary file, then rename), so a plot of a file never sees half of it.
"""
from __future__ import annotations

import json
import os
import pathlib
import time
from typing import Any

SCHEMA = 1
RESULTS_DIR = pathlib.Path(__file__).resolve().parent / "results"  # git-ignored


def default_path(prefix: str, *, suffix: str = "") -> pathlib.Path:
    """``bench/results/<prefix>-<timestamp><suffix>.json``."""
    return RESULTS_DIR / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}{suffix}.json"


def write_results(document: dict[str, Any], path: pathlib.Path | None = None, *, prefix: str,
                  suffix: str = "") -> pathlib.Path:
    """Write ``document`` (stamped with the schema) to ``path`` or the default place; return the path."""
    if path is None:
        path = default_path(prefix, suffix=suffix)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"schema": SCHEMA, **document}, indent=2, default=str) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_results(path: pathlib.Path) -> dict[str, Any]:
    """A document written by ``write_results``; ``ValueError`` for anything else."""
    try:
        document = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(document, dict) or document.get("kind") not in ("bench", "grad"):
        raise ValueError(f"{path}: not a result file of python -m bench or python -m bench.grad")
    if document.get("schema") != SCHEMA:
        raise ValueError(f"{path}: result file schema {document.get('schema')}, this bench reads {SCHEMA}")
    return document
