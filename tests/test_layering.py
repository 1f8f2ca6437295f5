"""The layers of the house, read with ``ast`` (nothing is imported).

* The stages -- ``frontend``, ``gpu2cpu``, ``autodiff``, ``codegen`` -- may import the ground floor
  but not each other.
* The ground floor -- ``polypy`` outside the driver layer: ``polypy.ir``, ``polypy.poly``,
  ``polypy.passes``, ``polypy.emulator``, ``polypy.analysis``, ``polypy.errors``,
  ``polypy.launch``, ``polypy.coarsening``, ... -- imports no stage, and neither it nor a stage
  imports the driver (``polypy.driver``) or bare ``polypy`` (whose ``__init__`` re-exports the
  driver's API).
* The driver layer -- ``polypy/driver/`` and the public modules ``polypy/torch.py`` (with its
  ``polypy/torch_autograd.py`` and
  ``polypy/torch_ext/``) and
  ``polypy/distributed.py`` (which may import ``polypy.driver``), and ``polypy/__init__.py`` (lazy
  re-exports) -- is the only one that wires stages together, and imports them inside functions
  only.
* Only ``frontend`` imports ``clang``; only ``codegen`` imports ``llvmlite`` and ``jinja2``; only
  ``polypy/poly`` imports ``islpy``.
* No import cycle among the project's modules (``polypy``, the stages, ``bench``, ``samples``)
  at module level; ``test_function_level_cycles_are_the_known_ones`` keeps the ones through
  function-level imports from growing.
* No source file of ``polypy`` or a stage is longer than ``MAX_SOURCE_LINES`` (600).
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
STAGES = ("frontend", "gpu2cpu", "autodiff", "codegen")
DRIVER_LAYER = ("polypy/driver/", "polypy/torch.py", "polypy/torch_autograd.py", "polypy/torch_ext/", "polypy/distributed.py", "polypy/__init__.py")
PACKAGES = ("polypy", *STAGES, "bench", "samples")


def _imports(path: pathlib.Path, *, top_level_only: bool = False):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def _files(package: str):
    return sorted((ROOT / package).rglob("*.py"))


def _rel(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _ground_floor():
    return [p for p in _files("polypy") if not _rel(p).startswith(DRIVER_LAYER)]


def test_stages_do_not_import_each_other():
    bad = []
    for stage in STAGES:
        for path in _files(stage):
            for line, name in _imports(path):
                head = name.split(".")[0]
                if head in STAGES and head != stage:
                    bad.append(f"{_rel(path)}:{line}: imports {name}")
    assert not bad, "\n".join(bad)


def test_third_party_libraries_stay_in_their_stage():
    owners = {"clang": ("frontend",), "llvmlite": ("codegen",), "jinja2": ("codegen",), "islpy": ("polypy/poly",)}
    bad = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        rel = _rel(path)
        if rel.startswith(("tests/", "bench/", "samples/", ".ci-venv/", ".venv/", "build/")):
            continue
        for line, name in _imports(path):
            head = name.split(".")[0]
            if head in owners and not any(rel.startswith(o + "/") for o in owners[head]):
                bad.append(f"{rel}:{line}: imports {name}")
    assert not bad, "\n".join(bad)


def test_driver_layer_imports_stages_only_inside_functions():
    bad = []
    for path in _files("polypy"):
        if not _rel(path).startswith(DRIVER_LAYER):
            continue
        for line, name in _imports(path, top_level_only=True):
            if name.split(".")[0] in STAGES:
                bad.append(f"{_rel(path)}:{line}: top-level import of {name}")
    assert not bad, "\n".join(bad)


def test_ground_floor_imports_no_stage():
    bad = [f"{_rel(path)}:{line}: imports {name}"
           for path in _ground_floor() for line, name in _imports(path) if name.split(".")[0] in STAGES]
    assert not bad, "\n".join(bad)


def _driver_or_bare_polypy(path: pathlib.Path):
    """Imports of ``polypy.driver`` (any module of it) or of bare ``polypy``, anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            if name == "polypy" or name == "polypy.driver" or name.startswith("polypy.driver."):
                yield node.lineno, name


def test_stages_and_ground_floor_do_not_import_the_driver_or_bare_polypy():
    files = [p for stage in STAGES for p in _files(stage)] + _ground_floor()
    bad = [f"{_rel(path)}:{line}: imports {name}" for path in files for line, name in _driver_or_bare_polypy(path)]
    assert not bad, "\n".join(bad)


def test_the_driver_layer_is_where_the_layering_says():
    """The checks above rely on these paths: the driver package exists and the ground floor is
    not empty (a move that left them behind would make every check vacuous)."""
    assert (ROOT / "polypy" / "driver" / "pipelines.py").is_file()
    assert (ROOT / "polypy" / "launch.py").is_file()
    ground = {_rel(p) for p in _ground_floor()}
    assert {"polypy/errors.py", "polypy/launch.py", "polypy/ir/nodes.py", "polypy/passes/pipeline.py"} <= ground
    assert not any(r.startswith("polypy/driver/") for r in ground)


# ---- import cycles ---------------------------------------------------------------------------

def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for package in PACKAGES for p in _files(package)}


def _resolve(module: str, node: ast.ImportFrom | ast.Import, modules: dict[str, pathlib.Path]) -> list[str]:
    """The project modules an import statement in ``module`` loads by name (the named module, or
    for ``from a import b`` the submodule ``a.b`` where there is one); parent packages' ``__init__``
    are not counted (every module of a package would otherwise be in a cycle with it)."""
    out = []
    if isinstance(node, ast.Import):
        out = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            is_package = modules[module].name == "__init__.py"
            parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
            base = ".".join(parts + ([base] if base else []))
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            out.append(sub if sub in modules else base)
    return [m for m in out if m in modules]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _on_import(body: list[ast.stmt], *, functions: bool = False):
    """The statements that run when the module is imported: its body with the bodies of its
    ``if``/``try``/``with``/loops and classes, not ``if TYPE_CHECKING:``, and not functions
    unless ``functions`` (then: every statement that may ever run)."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if functions:
                yield from _on_import(stmt.body, functions=True)
            continue
        yield stmt
        if isinstance(stmt, ast.If):
            if not _is_type_checking(stmt.test):
                yield from _on_import(stmt.body, functions=functions)
            yield from _on_import(stmt.orelse, functions=functions)
        elif isinstance(stmt, ast.Try):
            for part in (stmt.body, stmt.orelse, stmt.finalbody, *(h.body for h in stmt.handlers)):
                yield from _on_import(part, functions=functions)
        elif isinstance(stmt, (ast.With, ast.For, ast.While, ast.ClassDef)):
            yield from _on_import(stmt.body, functions=functions)
            yield from _on_import(getattr(stmt, "orelse", []), functions=functions)


def _graph(*, top_level_only: bool) -> dict[str, set[str]]:
    modules = _project_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = list(_on_import(tree.body, functions=not top_level_only))
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module].update(t for t in _resolve(module, node, modules) if t != module)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_import_resolution():
    tree = ast.parse("import a\nif TYPE_CHECKING:\n    import b\nelse:\n    import c\ntry:\n    import d\n"
                     "except ImportError:\n    import e\ndef f():\n    import g\nclass C:\n    import h\n")
    names = [n.names[0].name for n in _on_import(tree.body) if isinstance(n, ast.Import)]
    assert names == ["a", "c", "d", "e", "h"]
    names = [n.names[0].name for n in _on_import(tree.body, functions=True) if isinstance(n, ast.Import)]
    assert names == ["a", "c", "d", "e", "g", "h"]
    graph = _graph(top_level_only=True)
    assert "polypy.driver.output" in graph["polypy.driver.commands"]  # from polypy.driver.output import ...
    assert "polypy.ir.nodes" in graph["polypy.launch"]  # from polypy.ir import nodes as n
    assert "polypy.driver.commands" in graph["polypy.driver.cli"]  # from polypy.driver import commands


def test_no_import_cycle_at_module_level():
    cycles = _cycles(_graph(top_level_only=True))
    assert not cycles, "import cycles (module level):\n" + "\n".join(" <-> ".join(c) for c in cycles)


# Cycles through imports inside functions (a module imports another when one of its functions
# runs). They cannot fail at import time, but each is a knot in the layering: this list may only
# shrink.
KNOWN_FUNCTION_LEVEL_CYCLES: list[list[str]] = []


def test_function_level_cycles_are_the_known_ones():
    cycles = _cycles(_graph(top_level_only=False))
    assert cycles == KNOWN_FUNCTION_LEVEL_CYCLES, "\n".join(" <-> ".join(c) for c in cycles)


def test_cli_and_commands_do_not_import_each_other_both_ways():
    graph = _graph(top_level_only=False)
    assert "polypy.driver.commands" in graph["polypy.driver.cli"]
    assert "polypy.driver.cli" not in graph["polypy.driver.commands"]


# Files are cut by responsibility before they grow past this (STYLE.md; issue 39).
MAX_SOURCE_LINES = 600


def test_no_source_file_is_longer_than_the_limit():
    long = []
    for package in ("polypy", *STAGES):
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_SOURCE_LINES:
                long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not long, "source files over the limit: " + "; ".join(long)
