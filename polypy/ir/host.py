"""Host code of a whole CUDA program, as the frontend found it.

polypy keeps host code as written. The frontend records, per source file, the spans the
translator must rewrite: every ``kernel<<<grid, block, shmem, stream>>>(args)`` launch, the
definitions of device code (replaced by translated kernels or dropped once inlined), and the
``#include`` directives of CUDA headers (replaced by polypy's runtime) or of user files
(inlined, so the output is one self-contained file). Offsets are byte offsets into ``text``.
"""
from __future__ import annotations

import dataclasses

from polypy.errors import Loc


@dataclasses.dataclass(frozen=True)
class LaunchSite:
    kernel: str  # IR kernel name (template instances: "scale_256")
    start: int
    end: int
    grid: str
    block: str
    shmem: str | None
    stream: str | None
    args: tuple[str, ...]
    loc: Loc | None = None
    # The shapes as (x, y, z) when they are constant expressions (``dim3(32, 8)``, ``128``, a
    # ``const int``), else None (a ``dim3`` variable, a size computed at run time).
    grid_shape: tuple[int, int, int] | None = None
    block_shape: tuple[int, int, int] | None = None
    # A launch inside a host function template whose instances launch different kernels
    # (``k<B, T><<<g, B>>>(...)`` in ``template <int B, class T> void run(...)``): one site per
    # kernel, all at the same span, each with the C++ condition on the template's parameters
    # under which it is the one launched (``(B) == (128) && __is_same(T, float)``).
    when: str | None = None
    # Where each shape comes from (``dim3 threads(BLOCK_SIZE, BLOCK_SIZE)``), or why it is not
    # known at compile time (``dimGrid.x = i (line 172) is not a constant``): for ``--report``.
    grid_from: str = ""
    block_from: str = ""


@dataclasses.dataclass(frozen=True)
class DeviceSpan:
    """Device code in a file: a kernel (or kernel template) definition, or a device function."""

    start: int
    end: int
    kind: str  # "kernel" | "device" | "global-var" | "symbol-name" (a string naming a device symbol)
    # | "function-id" (a device function named in a module variable's initializer: ``kernels[0]``, its id)
    kernels: tuple[str, ...] = ()  # the IR kernels a "kernel" span becomes; a "symbol-name": the symbol
    # A non-template kernel's host identity (``HostStub``): declared at each declaration of the
    # kernel, defined after its translated code at its definition.
    stub: "HostStub | None" = None
    # A kernel template's definition: its declaration as written (the template of its instances'
    # host stubs), and one explicit specialization per translated instance (``storage`` "template <>").
    template_head: str | None = None
    instance_stubs: tuple["HostStub", ...] = ()
    # Instances of a kernel template whose code goes later in the program, after a type their
    # template arguments name (``HostFile.placed``; frontend.instance_places).
    later: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class HostStub:
    """The host function a kernel is in host code, as nvcc's host stub is: the kernel's own name
    and parameter types (so C++ linkage names it alike in every file: overloads, namespaces).
    Called after a launch configuration was pushed (``polypy_rt_push_config``), it launches the
    kernel with it; its address is the kernel's handle (``cudaLaunchKernel``, ``cudaFuncGetAttributes``,
    a pointer to a kernel launched with ``<<<...>>>``)."""

    name: str  # the kernel's name as written (unqualified: the stub goes where the kernel was)
    params: tuple[tuple[str, str], ...]  # (C++ type, parameter name) in order
    storage: str = ""  # "static" (internal linkage), "inline" (defined in a header), or ""
    kernel: str | None = None  # at a definition: the IR kernel it launches
    # hidden arguments after the parameters (textures, surfaces): C text, ``{k}`` standing for argument k
    extra_args: tuple[str, ...] = ()
    shared_bytes: int = 0  # the kernel's static shared memory (cudaFuncAttributes.sharedSizeBytes)
    const_bytes: int = 0  # the __constant__ arrays it reads (cudaFuncAttributes.constSizeBytes)


@dataclasses.dataclass(frozen=True)
class IndirectLaunch:
    """``f<<<grid, block, shmem, stream>>>(args)`` where ``f`` is not a kernel this file defines:
    a kernel declared here and defined in another file, or a pointer to a kernel. As CUDA does, the
    configuration is pushed and the host stub ``f`` points to is called with the arguments."""

    start: int
    end: int
    callee: str  # the source text of the callee expression
    grid: str
    block: str
    shmem: str | None
    stream: str | None
    args: tuple[str, ...]
    loc: Loc | None = None


@dataclasses.dataclass(frozen=True)
class IncludeSpan:
    start: int
    end: int
    target: str | None  # resolved path of the included file
    kind: str  # "cuda" (a CUDA header: replaced by polypy's runtime) | "user" (inlined) | "system" (kept)
    # (start, end) character spans of the ``#pragma once`` directives of a "user" header: the
    # inlined text drops them (it is included once; in the main file GCC warns about them).
    once: tuple[tuple[int, int], ...] = ()


@dataclasses.dataclass(frozen=True)
class CopySpan:
    """A ``cudaMemcpy`` between a local device pointer and a local host pointer
    (``frontend.host_copies``), and why either way, for ``--report``: ``shared`` where no copy
    is needed. To the device, the device array becomes the host buffer (the call becomes
    ``polypy_rt_share_copy``); to the host, the host pointer takes the device array's memory
    (``polypy_rt_take_copy``), and ``renames`` replace the called function at ``(start, end)``:
    the host pointer's ``malloc``/``calloc`` and the ``free`` calls of the memory's owners become
    the runtime's ``polypy_rt_host_malloc``/``_calloc``/``_free``."""

    start: int
    end: int
    device: str
    host: str
    count: str
    shared: bool
    why: str
    loc: Loc | None = None
    direction: str = "to-device"  # or "to-host", or "round-trip-out" (frontend.host_round_trips: polypy_rt_same_copy)
    renames: tuple[tuple[int, int, str], ...] = ()

    def format(self) -> str:
        where = f"{self.loc}: " if self.loc is not None else ""
        verdict = "no copy, " if self.shared else "copied: "
        src, dst = (self.host, self.device) if self.direction == "to-device" else (self.device, self.host)
        return f"{where}cudaMemcpy of {src} to {dst}: {verdict}{self.why}"


@dataclasses.dataclass(frozen=True)
class LoopMerge:
    """A host loop that launches kernels (``frontend.merge_loops``): ``merged``, it runs in one
    OpenMP parallel region (every thread runs its scalar host code; each launch shares its grid
    among the team and ends at a barrier), with ``private`` (variables declared before the loop
    that it assigns) firstprivate and copied back after it; else its launches stay separate
    parallel regions, and ``why`` names what prevents the merge. ``start``/``end``: the loop."""

    start: int
    end: int
    merged: bool
    why: str
    launches: int
    private: tuple[str, ...] = ()
    loc: Loc | None = None

    def format(self) -> str:
        where = f"{self.loc}: " if self.loc is not None else ""
        plural = "es" if self.launches != 1 else ""
        verdict = "merged into one parallel region: " if self.merged else "launches kept separate: "
        return f"{where}host loop with {self.launches} launch{plural}: {verdict}{self.why}"


@dataclasses.dataclass(frozen=True)
class HostFile:
    path: str
    text: str
    launches: tuple[LaunchSite, ...]
    device_spans: tuple[DeviceSpan, ...]
    includes: tuple[IncludeSpan, ...]
    copies: tuple[CopySpan, ...] = ()
    indirect: tuple[IndirectLaunch, ...] = ()
    loops: tuple[LoopMerge, ...] = ()
    # (offset, kernel): kernel template instances translated at this offset of this file instead of
    # at their template (``DeviceSpan.later``), before the declaration that starts there.
    placed: tuple[tuple[int, str], ...] = ()
    # Lambdas made in host code and passed to kernels (frontend.closures): (offset, text) of the
    # records declared for their closures, before what is placed at that offset, and the
    # (start, end, text) replacements that make a record where the program makes the lambda.
    records: tuple[tuple[int, str], ...] = ()
    closures: tuple[tuple[int, int, str], ...] = ()
    # (offset, record, kernel): a host function template launching a kernel instance that takes a
    # lambda's closure names the record and the instance's launcher: both declared before it.
    forwards: tuple[tuple[int, str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class HostProgram:
    main: str
    files: dict[str, HostFile]
    has_main: bool
    # The kernels the program names other than as the kernel of a launch (``&k``, ``(void*)k``,
    # ``cudaLaunchKernel``...: their host stubs run them with shapes known only at run time).
    as_values: frozenset[str] = frozenset()
    part: bool = False  # one file of a program built by separate compilation (``translate -c``)

    @property
    def launches(self) -> tuple[LaunchSite, ...]:
        return tuple(l for f in self.files.values() for l in f.launches)

    @property
    def copies(self) -> tuple[CopySpan, ...]:
        return tuple(c for f in self.files.values() for c in f.copies)

    @property
    def loops(self) -> tuple[LoopMerge, ...]:
        return tuple(l for f in self.files.values() for l in f.loops)


def needs_stub(host: HostProgram, kernel: str) -> bool:
    """Whether the program may run ``kernel`` through its host stub: where it names the kernel
    as a value (``HostProgram.as_values``), launches through a pointer, or is one file of a
    program built by separate compilation (or has no main: another file may launch it). A kernel
    the program only launches with ``<<<...>>>`` needs none (nor the runtime's stub registry)."""
    return host.part or not host.has_main or kernel in host.as_values or any(f.indirect for f in host.files.values())
