"""Target-independent passes on the IR and the pipeline that runs them.

Every pass is a pure function ``Kernel -> Kernel`` named by a verb. ``SIMPLIFY`` is the list
the driver runs right after the frontend.
"""
from polypy.passes.eliminate_dead_code import eliminate_dead_code
from polypy.passes.fold_constants import fold_constants, fold_expr
from polypy.passes.forward_scalars import forward_scalars
from polypy.passes.pipeline import Pass, run_pipeline

SIMPLIFY: tuple[Pass, ...] = (
    Pass("fold-constants", fold_constants),
    Pass("forward-scalars", forward_scalars),
    Pass("fold-constants", fold_constants),
    Pass("eliminate-dead-code", eliminate_dead_code),
)

__all__ = ["Pass", "run_pipeline", "SIMPLIFY", "fold_constants", "fold_expr", "forward_scalars",
           "eliminate_dead_code"]
