"""A kernel's versions printed as C: a block function per version and the launcher that chooses.

The versions are an IR value made by the pipeline (``polypy.ir.versions.KernelVersions``, by the
passes of ``polypy.passes.versions``: a version per block shape, its coarse-block version, the
twins whose written pointers are restrict where the arrays are apart; a default for every other
launch, or none where every launch has one of the shapes). Nothing is decided here: each
version's guard is printed by the C expression printer, nested by condition, in the value's
order; the block functions themselves are ``codegen.c.kernel.KernelEmitter``'s.
"""
from __future__ import annotations

import functools

from typing import Sequence

from polypy.ir import nodes as n
from polypy.ir.cexpr import ATOM, CExprPrinter
from polypy.ir.versions import WORKERS, ArraysApart, EnoughCoarseBlocks, Facts, GridWithin, Guard, KernelVersions, known

from codegen.c.kernel import KernelCode, KernelEmitter, Options
from codegen.c.render import INDENT, c_type, literal


class _GuardPrinter(CExprPrinter):
    """Guards in the launcher's names: ``grid.x``/``grid_x``, ``block.x``/``block_x``, the
    workers, the launcher's arguments."""

    def __init__(self, options: Options, arguments: dict[str, str]):
        self.dims = {n.GridDim: ("grid.", "grid_"), n.BlockDim: ("block.", "block_")}
        self.cpp = options.cpp
        self.workers = str(options.threads) if options.threads > 0 else "POLYPY_WORKERS()"
        self.arguments = arguments

    def gpu_index(self, e: n.GpuIndex) -> tuple[str, int]:
        return self.dims[type(e)][0 if self.cpp else 1] + "xyz"[e.dim], ATOM

    def var(self, e: n.Var) -> tuple[str, int]:
        if e == WORKERS:
            return f"({self.workers})", ATOM
        return self.arguments[e.name], ATOM

    def const(self, c: n.Const) -> tuple[str, int]:
        return literal(c)

    def extra_parens(self, child: n.Expr, text: str, level: int, parent: n.Expr) -> bool:
        # `(a + 3) / 4 * b` read as `((a + 3) / 4) * b`: mixed multiplicative operators in parentheses
        return (isinstance(parent, n.Binary) and isinstance(child, n.Binary) and child.op != parent.op
                and parent.op in ("mul", "div", "rem") and level < ATOM)

    def type_name(self, t) -> str:
        return c_type(t)


def guard_text(guard: Guard, options: Options, arguments: dict[str, str] | None = None) -> str:
    """``guard`` as the C condition a launcher tests (``arguments``: the C name of each pointer
    argument it names, by IR name)."""
    return _GuardPrinter(options, arguments or {}).expr(guard.expr())


def emit_kernel(kernel: n.Kernel, options: Options, *, versions: KernelVersions | None = None,
                barriers: Sequence[object] | None = None) -> KernelCode:
    """The C/C++ code of one CPU-form kernel: its versions' block functions and the launcher.

    ``barriers``: the decisions of ``gpu2cpu.barriers.eliminate_barriers`` on this kernel (its
    ``report``); each removed barrier gets a comment where it was (``codegen.c.readable``).

    ``versions``: the kernel's versions (made by the pipeline: ``polypy.passes.versions.
    build_versions``); without them, the kernel alone. The launcher dispatches on the guards::

        void K_launch(grid, block, shmem, ...) {
            if (block.x == 32u && block.y == 8u && block.z == 1u) {
                if (<enough coarse blocks>) { K_launch_b32x8x1_c4x1x1(...); return; }
                K_launch_b32x8x1(...); return;
            }
            K_launch_generic(...);
        }

    Without a default, a launch no guard takes would be a broken promise: the launcher says so
    and aborts rather than run a version made for another shape.
    """
    if versions is None:
        versions = KernelVersions(kernel)
    if not versions.versions:
        return KernelEmitter(kernel, options, barriers=barriers).emit()
    main = KernelEmitter(kernel, options)
    decl, values = main.signature()
    printer = _GuardPrinter(options, {p.name: values[i] for i, p in enumerate(kernel.params)})
    emitters = [KernelEmitter(k, options, variant=guard.suffix(), barriers=barriers) for guard, k in versions.versions]
    fallback = KernelEmitter(versions.default, options, variant="generic", barriers=barriers) \
        if versions.default is not None else None
    forward = ", ".join(main.forwarded())
    reached: set[int] = set()

    def calls(items: list[tuple[tuple[n.Expr, ...], int]], depth: int) -> tuple[list[str], bool]:
        """The dispatch of ``items`` (conditions left, version index), in order; whether it
        always returns."""
        out: list[str] = []
        i = 0
        while i < len(items):
            conditions, index = items[i]
            if not conditions:
                reached.add(index)
                return out + [f"{INDENT * depth}{emitters[index].launcher_name}({forward});",
                              f"{INDENT * depth}return;"], True
            head = conditions[0]
            j = i
            while j < len(items) and items[j][0][:1] == (head,):
                j += 1
            inner, _ = calls([(c[1:], k) for c, k in items[i:j]], depth + 1)
            out += [f"{INDENT * depth}if ({printer.expr(head)}) {{", *inner, f"{INDENT * depth}}}"]
            i = j
        return out, False

    def dispatcher(head: str, facts: Facts, *, promised: bool = False) -> list[str]:
        """The launcher choosing a version, with what ``facts`` know folded into the guards
        (the entry ``K_launch_apart``: the caller ``promised`` the arrays apart)."""
        items = []
        for index, (guard, _) in enumerate(versions.versions):
            left: list[n.Expr] = []
            for condition in guard.conditions:
                value = known(condition.expr(), facts)
                if isinstance(value, n.Const):
                    if not value.value:
                        break
                    continue
                left.append(value)
            else:
                items.append((tuple(left), index))
        signature = decl.replace(f" {main.launcher_name}(", f" {main.launcher_name}_apart(", 1) if promised else decl
        body, returns = calls(items, 1)
        lines = [head, signature, "{", *body]
        if returns:
            return lines + ["}"]
        if fallback is not None:
            return lines + [f"{INDENT}{fallback.launcher_name}({forward});", "}"]
        return lines + [INDENT + line for line in _no_version(kernel, versions)] + ["}"]

    twins = any(guard.find(ArraysApart) is not None for guard, _ in versions.versions)
    if options.program and not twins and fallback is None and len(versions.versions) == 1:
        return _only_version(kernel, versions, options, printer, barriers)
    title = f"/* Launch {kernel.name}<<<grid, block, shmem_bytes>>>: the version compiled for the launch's block shape, if any."
    if not twins:
        lines = dispatcher(title + " */", Facts())
    elif options.program:
        lines = dispatcher(title + "\n * With every written array in a cudaMalloc allocation no other argument points "
                           "into, the version whose written\n * pointers are restrict (polypy.passes.apart_twins). */",
                           Facts())
    else:
        lines = dispatcher(title + " */", Facts(apart=False)) + [""] + dispatcher(
            title + "\n * The caller promises that every array the kernel writes lies in storage no other argument "
            "points into\n * (polypy.passes.apart_twins): the versions whose written pointers are restrict. */",
            Facts(apart=True), promised=True)
    # Block functions: the fine versions, then their twins, then the coarse ones (and their twins).
    order = sorted(reached, key=lambda i: (versions.versions[i][0].find(EnoughCoarseBlocks) is not None,
                                           versions.versions[i][0].find(ArraysApart) is not None, i))
    texts = [emitters[i].emit().text for i in order] + ([fallback.emit().text] if fallback is not None else [])
    return KernelCode(kernel.name, main.launcher_name, decl + ";", "\n\n".join(texts + ["\n".join(lines)]))


def _no_version(kernel: n.Kernel, versions: KernelVersions) -> list[str]:
    """A launch no version's guard takes, and no default: a broken promise, said before aborting."""
    what = "block shape and grid" if any(g.find(GridWithin) for g, _ in versions.versions) else "block shape"
    return [f'fprintf(stderr, "polypy: a launch of {kernel.name} with a {what} none of the program\'s launches '
            f'has\\n");', "abort();"]


def _only_version(kernel: n.Kernel, versions: KernelVersions, options: Options, printer: _GuardPrinter,
                  barriers: Sequence[object] | None) -> KernelCode:
    """A whole program's kernel with one version and no default: no dispatcher, the version's
    launcher is the kernel's own and checks the version's guard first (what the guard's facts
    fold to true is not tested; a guard that folds to false leaves only the check)."""
    guard, version = versions.versions[0]
    left: list[n.Expr] = []
    for condition in guard.conditions:
        value = known(condition.expr(), Facts())
        if isinstance(value, n.Const):
            if not value.value:
                left = [value]
                break
            continue
        left.append(value)
    entry: list[str] = []
    if left:
        test = printer.expr(functools.reduce(lambda a, b: n.Binary("land", a, b), left))
        entry = [f"if (!({test})) {{", *(INDENT + line for line in _no_version(kernel, versions)), "}"]
    return KernelEmitter(version, options, variant=guard.suffix(), barriers=barriers, entry=entry).emit()
