"""Kernel libraries through the C backend, with their versions from the versions stage.

``codegen.c`` only prints and compiles the versions it is given (``emit_kernels(...,
versions=...)``, ``build_library(..., versions=..., specialize=...)``); this module makes them,
with the passes of ``polypy.passes.versions`` (``build_versions``), as ``lower_and_emit`` does
for a whole program and the Python API per launch shape::

    from polypy.driver.library import build_library
    lib = build_library([cpu_kernel], block_shapes={"saxpy": [(256, 1, 1)]}, coarsen=block_coarsener(gpu))
    lib.launch("saxpy", grid, block, args)   # the shape's versions; other shapes: theirs, made on first launch

This module wires stages together (the versions stage -> codegen.c) and so imports them inside
functions only.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from polypy.ir import nodes as n
from polypy.ir.versions import KernelVersions
from polypy.passes.versions import Coarsener, build_versions
from polypy.stack import call_on_big_stack


def library_versions(kernels: Sequence[n.Kernel], *, block_shapes: Mapping[str, Sequence[tuple[int, ...]]] | None = None,
                     coarsen: Coarsener | None = None, check_bounds: bool = False) -> dict[str, KernelVersions]:
    """Per kernel with block shapes in ``block_shapes``, its versions (``build_versions``: one per
    shape, each with its coarse version where ``coarsen`` gives one and its twin for arrays
    apart, not with ``check_bounds``), the kernel itself as the default."""
    shapes = block_shapes or {}
    return {k.name: call_on_big_stack(build_versions, k, shapes=shapes[k.name], coarsen=coarsen,
                                      check_bounds=check_bounds)
            for k in kernels if shapes.get(k.name)}


def specializer(*, coarsen: Coarsener | None = None, check_bounds: bool = False):
    """For ``codegen.c.build_library(..., specialize=...)``: a kernel and a block shape -> its
    versions for launches of that shape, made by the same stage."""
    def specialize(kernel: n.Kernel, block: tuple[int, int, int]) -> KernelVersions:
        return call_on_big_stack(build_versions, kernel, shapes=(block,), coarsen=coarsen, check_bounds=check_bounds)

    return specialize


def emit_kernels(kernels: Sequence[n.Kernel], globals_: Sequence[n.Buffer] = (), *,
                 block_shapes: Mapping[str, Sequence[tuple[int, ...]]] | None = None,
                 coarsen: Coarsener | None = None, check_bounds: bool = False, **options: Any) -> str:
    """``codegen.c.emit_kernels`` with each kernel's versions for its ``block_shapes``
    (``library_versions``); ``options`` as there (``source``, ``cpp``, ``threads``, ``barriers``)."""
    from codegen.c import emit_kernels as emit

    versions = library_versions(kernels, block_shapes=block_shapes, coarsen=coarsen, check_bounds=check_bounds)
    return emit(kernels, globals_, check_bounds=check_bounds, versions=versions, **options)


def build_library(kernels: Sequence[n.Kernel], globals_: Sequence[n.Buffer] = (), *,
                  block_shapes: Mapping[str, Sequence[tuple[int, ...]]] | None = None, specialize: bool = True,
                  coarsen: Coarsener | None = None, check_bounds: bool = False, **options: Any):
    """``codegen.c.build_library`` with each kernel's versions for its ``block_shapes`` compiled in
    (``library_versions``) and, with ``specialize``, a new shape's versions made by the same stage on
    its first launch (``specializer``); ``options`` as there (``cpp``, ``threads``, ``source``,
    ``flags``)."""
    from codegen.c import build_library as build

    versions = library_versions(kernels, block_shapes=block_shapes, coarsen=coarsen, check_bounds=check_bounds)
    return build(kernels, globals_, check_bounds=check_bounds, versions=versions,
                 specialize=specializer(coarsen=coarsen, check_bounds=check_bounds) if specialize else None, **options)
