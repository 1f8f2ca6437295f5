"""A kernel's versions and the launcher that chooses among them (``emit_kernel``).

Per block shape the launches of a program are known to use, a version specialized for it
(``polypy.passes.specialize``), its coarse-block version where that pays
(``polypy.coarsening``), the twins whose written pointers are restrict where the arrays are apart
(``codegen.c.apart``); and the generic version for every other shape, left out where every
launch is known to have one of the shapes (``generic=False``). The block functions themselves
are ``codegen.c.kernel.KernelEmitter``'s.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from polypy.coarsening import CoarseVersion, pays_in_c
from polypy.ir import nodes as n
from polypy.ir.types import PointerType
from polypy.launch import check_block_shape
from polypy.passes.specialize import BlockShape, specialize_for_block

from codegen.c.apart import apart_twin, restricted, with_restrict, written_pointers
from codegen.c.kernel import KernelCode, KernelEmitter, Options, _param_index
from codegen.c.render import INDENT

# Per block shape, a kernel's block function for coarse blocks (``polypy.coarsening``), or None:
# called with the kernel (CPU form), the shape and the kernel specialized for that shape.
Coarsener = Callable[[n.Kernel, BlockShape, n.Kernel], Optional[CoarseVersion]]


def emit_kernel(kernel: n.Kernel, options: Options, *, block_shapes: Sequence[BlockShape] = (),
                coarsen: Coarsener | None = None, barriers: Sequence[object] | None = None,
                generic: bool = True) -> KernelCode:
    """The C/C++ code of one CPU-form kernel: block function and launcher.

    ``barriers``: the decisions of ``gpu2cpu.barriers.eliminate_barriers`` on this kernel (its
    ``report``); each removed barrier gets a comment where it was (``codegen.c.readable``).

    With ``block_shapes``, also a version specialized for each of those block shapes
    (``polypy.passes.specialize``: ``blockDim`` made constants) and a launcher that dispatches on
    the launch's block shape::

        void K_launch(grid, block, shmem, ...) {
            if (block == (256, 1, 1)) { K_launch_b256x1x1(grid, block, shmem, ...); return; }
            K_launch_generic(grid, block, shmem, ...);
        }

    ``coarsen`` gives, per shape, a version for coarse blocks (``gpu2cpu.coarsen_blocks``), run
    by the launches whose grid has enough of them (``polypy.coarsening.coarsening_pays``)::

            if (block == (32, 8, 1)) {
                if ((grid.x / 4) * grid.y * grid.z >= 8 * workers) { K_launch_b32x8x1_c4x1x1(...); return; }
                K_launch_b32x8x1(...); return;
            }

    ``generic=False`` (a whole program whose every launch of the kernel has one of
    ``block_shapes``): no generic version; a launch of another shape would be a broken promise,
    and the launcher says so and aborts rather than run a version made for another shape.
    """
    shapes = list(dict.fromkeys(check_block_shape(tuple(s)) for s in block_shapes))
    if not shapes:
        return KernelEmitter(kernel, options, barriers=barriers).emit()
    main = KernelEmitter(kernel, options)
    fallback = KernelEmitter(kernel, options, variant="generic", barriers=barriers)
    decl, values = main.signature()
    # Versions for arrays apart (codegen.c.apart) need a written pointer and another one to keep
    # it apart from: the run-time test, each pair of a written array and another argument once.
    written = [values[_param_index(kernel, w)] for w in written_pointers(kernel)]
    pointers = [values[i] for i, p in enumerate(kernel.params) if isinstance(p.ptype, PointerType)]
    pairs = list(dict.fromkeys((w, p) for w in written for p in pointers if p != w and not (p in written and
                                                                                       written.index(p) < written.index(w))))
    apart_test = " && ".join(f"polypy_rt_apart({a}, {b})" for a, b in pairs)
    # Per shape: the version and its coarse version (None: not coarsened), and the same two with
    # the written pointers restrict (None: no such twin).
    Pair = tuple[KernelEmitter, Optional[tuple[CoarseVersion, KernelEmitter]]]
    specialized: list[tuple[BlockShape, Pair, Optional[Pair]]] = []
    for shape in shapes:
        fine = specialize_for_block(kernel, shape)
        coarse = coarsen(kernel, shape, fine) if coarsen is not None else None
        name = variant_name(shape)

        def pair(fine_kernel: n.Kernel, coarse_kernel: n.Kernel | None, suffix: str) -> Pair:
            emitter = KernelEmitter(fine_kernel, options, variant=name + suffix, barriers=barriers)
            if coarse is None or coarse_kernel is None:
                return emitter, None
            coarse_name = f"{name}_c{'x'.join(map(str, coarse.factor))}{suffix}"
            return emitter, (coarse, KernelEmitter(coarse_kernel, options, variant=coarse_name, barriers=barriers))

        twin = apart_twin(fine) if apart_test and not options.check_bounds else None
        apart = None
        if twin is not None:
            apart = pair(twin, with_restrict(coarse.kernel, restricted(twin)) if coarse is not None else None, "_r")
        specialized.append((shape, pair(fine, coarse.kernel if coarse is not None else None, ""), apart))
    forward = ", ".join(main.forwarded())
    block = ("block.x", "block.y", "block.z") if options.cpp else ("block_x", "block_y", "block_z")
    grid = ("grid.x", "grid.y", "grid.z") if options.cpp else ("grid_x", "grid_y", "grid_z")
    workers = str(options.threads) if options.threads > 0 else "POLYPY_WORKERS()"

    def run(version: Pair, depth: int) -> list[str]:
        fine_emitter, coarse_pair = version
        out: list[str] = []
        if coarse_pair is not None:
            coarse_version, emitter = coarse_pair
            pays = pays_in_c(grid, coarse_version.factor, workers, coarse_version.blocks_per_worker)
            out += [f"{INDENT * depth}if ({pays}) {{", f"{INDENT * (depth + 1)}{emitter.launcher_name}({forward});",
                    f"{INDENT * (depth + 1)}return;", f"{INDENT * depth}}}"]
        return out + [f"{INDENT * depth}{fine_emitter.launcher_name}({forward});", f"{INDENT * depth}return;"]

    def dispatcher(head: str, when_apart: str | None, *, promised: bool = False) -> list[str]:
        """The launcher choosing a version by block shape: the twins where ``when_apart`` (a C
        condition) holds, or always where the caller ``promised`` the arrays apart (the entry
        ``K_launch_apart``); with neither, never."""
        signature = decl.replace(f" {main.launcher_name}(", f" {main.launcher_name}_apart(", 1) if promised else decl
        lines = [head, signature, "{"]
        for shape, version, apart in specialized:
            test = " && ".join(f"{b} == {d}u" for b, d in zip(block, shape))
            lines.append(f"{INDENT}if ({test}) {{")
            if apart is not None and promised:
                lines += run(apart, 2)
            else:
                if apart is not None and when_apart is not None:
                    lines += [f"{INDENT * 2}if ({when_apart}) {{", *run(apart, 3), f"{INDENT * 2}}}"]
                lines += run(version, 2)
            lines.append(f"{INDENT}}}")
        if generic:
            lines += [f"{INDENT}{fallback.launcher_name}({forward});", "}"]
        else:
            lines += [f'{INDENT}fprintf(stderr, "polypy: a launch of {kernel.name} with a block shape none of the '
                      f'program\'s launches has\\n");', f"{INDENT}abort();", "}"]
        return lines

    twins = [apart for _, _, apart in specialized if apart is not None]
    title = f"/* Launch {kernel.name}<<<grid, block, shmem_bytes>>>: the version compiled for the launch's block shape, if any."
    if not twins:
        lines = dispatcher(title + " */", None)
    elif options.program:
        lines = dispatcher(title + "\n * With every written array in a cudaMalloc allocation no other argument points "
                           "into, the version whose written\n * pointers are restrict (codegen.c.apart). */", apart_test)
    else:
        lines = dispatcher(title + " */", None) + [""] + dispatcher(
            title + "\n * The caller promises that every array the kernel writes lies in storage no other argument "
            "points into\n * (codegen.c.apart): the versions whose written pointers are restrict. */", None,
            promised=True)
    versions = [version for _, version, _ in specialized] + twins
    texts = [fine_emitter.emit().text for fine_emitter, _ in versions]
    texts += [coarse_pair[1].emit().text for _, coarse_pair in versions if coarse_pair is not None]
    texts += ([fallback.emit().text] if generic else []) + ["\n".join(lines)]
    return KernelCode(kernel.name, main.launcher_name, decl + ";", "\n\n".join(texts))


def variant_name(shape: BlockShape) -> str:
    return "b" + "x".join(str(d) for d in shape)
