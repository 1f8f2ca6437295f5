"""``polypy grad --emit cuda`` and device function pointers: refused, located.

In polypy's IR a device function pointer is the id polypy gives the function
(``frontend.function_ids``), and a call through one a dispatch over those ids; ``--emit cpp``
(polypy's own world of ids) translates such kernels, CUDA source cannot hold them.
"""
from __future__ import annotations

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.visitor import walk_only


def refuse_function_pointers(module: n.Module, gradient: n.Kernel) -> None:
    """A device function pointer is, in polypy's IR, the id polypy gives the function
    (``frontend.function_ids``), and a call through one a dispatch over those ids: written back
    as CUDA, the kernel would compare the real pointers a CUDA program passes (or keeps in
    ``__device__`` tables) with those ids and always fault, and a pointer parameter would be a
    ``long long`` that a launch passing a pointer does not compile against. Refused, located at
    the parameter or at the call."""
    from frontend.lower.function_pointers import DISPATCH_FAULT

    for k in module.kernels:
        if gradient.name not in (f"{k.name}_grad", f"{k.name}_fwd"):
            continue
        # frontend.lower.builder spells a function-pointer parameter `decltype((T (*)(A))0)`
        params = {p.name: p for p in k.params}
        for sp in k.source_params:
            if sp.ctype.startswith("decltype(("):
                where = params[sp.members[0][1]].loc if sp.members and sp.members[0][1] in params else None
                raise UserError(f"the device function pointer parameter '{sp.name}' of kernel '{k.name}' cannot be "
                                "written back as CUDA source (polypy grad --emit cuda: polypy numbers device "
                                "functions with ids of its own, which the pointers of a CUDA program are not); "
                                "--emit cpp translates it", where or k.loc)
    for s in walk_only(gradient, n.AssertFail):
        if s.text == DISPATCH_FAULT:
            raise UserError("a call through a device function pointer cannot be written back as CUDA source "
                            "(polypy grad --emit cuda: polypy numbers device functions with ids of its own, "
                            "which the pointers of a CUDA program are not); --emit cpp translates it", s.loc)
