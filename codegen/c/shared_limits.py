"""The dynamic shared memory a whole program's launches may ask for, per kernel.

As on a compute capability 8.0 GPU: 48 KiB less the kernel's static ``__shared__`` arrays, unless
``cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, n)`` raised it (up to 163
KiB with the static arrays). Each launcher tests its launch's amount (``polypy_rt_shared_ok``,
``polypy/runtime/parts/errors.h``) against a constant, or, for a kernel with a host stub (the only
ones ``cudaFuncSetAttribute`` can name), against a variable its stub's registration hands to the
runtime (``parts/kernels.h``). A launch over the limit runs nothing and is ``cudaErrorInvalidValue``.
"""
from __future__ import annotations

from typing import Mapping

from polypy.ir import nodes as n
from polypy.ir.host import HostProgram, needs_stub


def shared_limits(host: HostProgram, kernels: Mapping[str, n.Kernel],
                   static_shared: Mapping[str, int]) -> tuple[dict[str, str], dict[str, str]]:
    """Per kernel, the C expression of the most dynamic shared memory its launches may ask for
    (``polypy_rt_shared_ok``; empty where every launch of a kernel without a host stub asks for a
    literal amount within it), and for a kernel with a host stub the definition of the variable
    holding it, which the stub's registration hands to ``cudaFuncSetAttribute`` (parts/kernels.h)."""
    limits: dict[str, str] = {}
    variables: dict[str, str] = {}
    # (a kernel's own stub is emitted where the program needs it, an instance's always: _rewrite)
    stubbed = {name for name in kernels if needs_stub(host, name)}
    stubbed |= {stub.kernel for f in host.files.values() for span in f.device_spans for stub in span.instance_stubs}
    asked: dict[str, list[int | None]] = {}
    for launch in host.launches:
        asked.setdefault(launch.kernel, []).append(_literal_bytes(launch.shmem))
    for name in kernels:
        default = max(48 * 1024 - static_shared.get(name, 0), 0)
        if name not in stubbed and all(b is not None and b <= default for b in asked.get(name, [])):
            limits[name] = ""  # every launch asks for a literal amount within the limit: no test
        elif name in stubbed:
            limits[name] = max_dynamic_variable(name)
            variables[name] = (f"/* The dynamic shared memory a launch of {name} may ask for: 48 KiB less its static "
                               f"arrays,\n * or what cudaFuncSetAttribute sets (its host stub's registration). */\n"
                               f"static size_t {limits[name]} = {default};\n")
        else:
            limits[name] = str(default)
    return limits, variables


def _literal_bytes(shmem: str | None) -> int | None:
    """The dynamic shared memory a launch asks for when its text is an integer literal (none: 0)."""
    if shmem is None:
        return 0
    try:
        return int(shmem.strip().rstrip("uUlL"), 0)
    except ValueError:
        return None


def max_dynamic_variable(kernel: str) -> str:
    return f"{kernel}_max_dynamic"
