"""Block coarsening wired for the backends: the block function of coarse blocks for a launch
shape (``coarsen_for_block``, the JIT) and the per-kernel coarsener ``codegen.c`` takes
(``block_coarsener``)."""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.passes import run_pipeline


def coarsen_for_block(kernel: n.Kernel, *, block: tuple[int, int, int], fine: n.Kernel | None = None,
                      factor: int | None = None, optimize: bool = True,
                      report: list | None = None) -> n.Kernel | None:
    """The block function of *coarse blocks* for launches of ``kernel`` (GPU form, from ``load``)
    with block shape ``block``, or None where coarsening is not legal or not worth it.

    ``gpu2cpu.coarsen_blocks``: ``factor`` consecutive blocks along x run as one block (chosen by
    ``plan_coarsening`` unless given), lowered with ``to_cpu`` and specialized for the coarse
    shape, then joined with ``fine`` -- the kernel's own block function specialized for
    ``block`` (made here when not given) -- which runs the blocks of a partial coarse block.
    The result is CPU form, specialized, with ``Kernel.coarsen == (factor, 1, 1)``.
    ``report`` receives the decision (``gpu2cpu.coarsen_blocks.Coarsening``).
    """
    from gpu2cpu.coarsen_blocks import join_partial_blocks, plan_coarsening
    from polypy.driver.pipelines import SIMPLIFY, make_pass, passes, to_cpu
    from polypy.ir.verifier import verify_kernel
    from polypy.launch import check_block_shape
    from polypy.passes.specialize import specialize_block_shape

    block = check_block_shape(block)
    plan = plan_coarsening(kernel, block=block, factor=factor)
    if report is not None:
        report.append(plan)
    if plan.factor == 1:
        return None
    rewrite = (make_pass("coarsen-blocks", block=block, factor=plan.factor),) + passes(SIMPLIFY)
    coarse_gpu = run_pipeline(kernel, rewrite)
    coarse = specialize_block_shape(to_cpu(coarse_gpu, optimize=optimize),
                                    block=(plan.factor * block[0], block[1], block[2]))
    if fine is None:
        fine = specialize_block_shape(to_cpu(kernel, optimize=optimize), block=block)
    joined = join_partial_blocks(coarse, fine, factor=plan.factor)
    verify_kernel(joined)
    return joined


def block_coarsener(module: n.Module, *, factor: int | None = None, optimize: bool = True):
    """For ``codegen.c`` (``build_library(..., coarsen=...)``, ``emit_kernels``): a function that
    gives, per kernel and block shape, its version for coarse blocks (``polypy.coarsening.
    CoarseVersion``) made from ``module``'s GPU form with ``coarsen_for_block``, or None.

    ``factor`` forces that factor wherever it is legal, and the version then runs on every launch
    (for testing); None: the model chooses and launches with too few coarse blocks run the kernel
    as it is.
    """
    from polypy.coarsening import BLOCKS_PER_WORKER, CoarseVersion

    def coarsen(kernel: n.Kernel, block: tuple[int, int, int], fine: n.Kernel) -> CoarseVersion | None:
        try:
            gpu = module.kernel(kernel.name)
        except KeyError:
            return None
        coarse = coarsen_for_block(gpu, block=block, fine=fine, factor=factor, optimize=optimize)
        if coarse is None:
            return None
        return CoarseVersion(coarse, 0 if factor is not None else BLOCKS_PER_WORKER)

    return coarsen
