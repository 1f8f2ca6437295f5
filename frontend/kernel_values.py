"""Kernels as host values: host stubs, launches through them, and what stays refused.

In a CUDA program a kernel's name in host code denotes its *host stub*: a host function of the
kernel's name and parameter types that launches the kernel with the configuration the last
``<<<...>>>`` pushed. ``&k``, ``(void*)k``, a ``void (*)(float*, int)`` variable holding it, an
array of them, ``cudaLaunchKernel((void*)k, ...)``, ``cudaFuncGetAttributes(&a, k)`` all work on
that function, and so does separate compilation: ``a.cu`` declares ``k`` and launches it, the
call reaches ``b.cu``'s stub through ordinary C++ linkage.

polypy emits the same (``polypy.ir.host.HostStub``; ``codegen.c.module`` renders it): at each
declaration of a non-template kernel, the stub's declaration; after a kernel's translated code,
its definition and the kernel's registration with the runtime (``parts/kernels.h``). A launch of a
kernel the file does not define, or through a pointer, becomes what nvcc makes of it: the
configuration pushed, then the call (``polypy.ir.host.IndirectLaunch``).

A kernel template keeps its declaration (``template <class T> __global__ void k(T* x);``) and each
translated instance's stub is an explicit specialization of it (``template <> void k<float>(float*
x)``), so ``k<Real>`` in a class template's member names the stub of its instance at C++ compile
time. An instance defined in another file (separate compilation) stays a located error.
"""
from __future__ import annotations

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.host import HostStub

from frontend.clang_setup import cursor_loc, parse_translation_unit
from frontend.function_scan import scan
from frontend.lower import CK, function_body, is_device_decl, is_kernel_decl


def is_template_kernel(cursor: ci.Cursor) -> bool:
    """A kernel template or one of its instances (no host stub: see the module docstring)."""
    if cursor.kind == CK.FUNCTION_TEMPLATE:
        return True
    try:
        return cursor.get_num_template_arguments() > 0
    except Exception:  # noqa: BLE001 - libclang raises for non-templates on some versions
        return False


def stub_type(t: ci.Type) -> str:
    """A parameter type as C++ that a parameter name can follow: ``float (*)[4]`` goes through
    ``polypy_rt_type<...>`` (an alias template: the type itself, so the mangled name is alike)."""
    spelling = t.spelling
    if "(" in spelling or "[" in spelling:
        return f"polypy_rt_type<{spelling}>"
    return spelling


def host_stub(cursor: ci.Cursor, kernel: str | None = None, extra_args: tuple[str, ...] = (),
              shared_bytes: int = 0, const_bytes: int = 0) -> HostStub:
    """The host stub of a non-template kernel, from one of its declarations (``kernel``: the IR
    kernel, at the definition)."""
    params = []
    for i, p in enumerate(cursor.get_arguments()):
        params.append((stub_type(p.type), p.spelling or f"polypy_arg{i}"))
    storage = "static" if cursor.storage_class == ci.StorageClass.STATIC else ""
    return HostStub(cursor.spelling, tuple(params), storage, kernel, extra_args, shared_bytes, const_bytes)


def static_bytes(kernel: n.Kernel) -> tuple[int, int]:
    """The bytes of a kernel's ``__shared__`` arrays of constant size (``sharedSizeBytes``) and of
    the ``__constant__`` arrays it uses (``constSizeBytes``; a kernel lists the module arrays it uses
    among its buffers)."""
    return (_bytes(b for b in kernel.buffers if b.space == "shared"),
            _bytes(b for b in kernel.buffers if b.space == "constant"))


def _bytes(buffers) -> int:
    total = 0
    for b in buffers:
        if b.shape is None or not all(isinstance(d, n.Const) for d in b.shape):
            continue
        count = 1
        for d in b.shape:
            count *= int(d.value)  # type: ignore[attr-defined]
        total += count * b.elem.itemsize
    return total


def kernel_values(fn: ci.Cursor, launched: set[tuple]) -> list[ci.Cursor]:
    """The kernel template instances named in host code other than as the kernel of a launch (as
    ``cudaFuncGetAttributes(&a, k<float>)``, a pointer, a cast): their host stubs are explicit
    specializations of the template's declaration, so these instances are translated too. An
    instance this file does not define is refused. ``launched``: the places (file, offset) of
    the launches' callees."""
    out = []
    for ref in scan(fn).function_refs:  # (one walk of fn for all such questions: frontend.function_scan)
        if not is_kernel_decl(ref.referenced):
            continue
        if is_template_kernel(ref.referenced) and _where(ref) not in launched:
            definition = ref.referenced.get_definition()
            if definition is None or function_body(definition) is None:
                raise UserError(f"kernel template instance '{ref.spelling}' is used as a value but not defined in "
                                "this file: define the template in a header both files include", cursor_loc(ref))
            out.append(definition)
    return out


def template_stub(cursor: ci.Cursor, args: list[str], kernel: str, extra_args: tuple[str, ...] = (),
                  shared_bytes: int = 0, const_bytes: int = 0) -> HostStub:
    """The host stub of a kernel template's instance: an explicit specialization (``template <>
    void k<float>(float* x)``) of the template's declaration, which stays where it was written."""
    stub = host_stub(cursor, kernel, extra_args, shared_bytes, const_bytes)
    return HostStub(f"{cursor.spelling}<{', '.join(args)}>", stub.params, "template <>", kernel, extra_args,
                    shared_bytes, const_bytes)


def named_as_values(decls: list[ci.Cursor], launch_config) -> list[ci.Cursor]:
    """The kernels ``decls`` (the program's declarations, host and device code) name other than
    as the kernel of a launch: their host stubs may run them with any shape."""
    launched: set[tuple] = set()
    refs: list[ci.Cursor] = []
    for d in decls:  # one walk of each declaration for every such question (frontend.function_scan)
        facts = scan(d)
        launched.update(_where(c) for c in facts.calls if launch_config(c) is not None)
        refs += [c for c in facts.function_refs if is_kernel_decl(c.referenced)]
    return [ref.referenced for ref in refs if _where(ref) not in launched]


def launched_callees(fn: ci.Cursor, launch_config) -> set[tuple]:
    """The places of the callees of the launches in ``fn`` (``launch_config(call)``: the
    configuration call of a launch, else None)."""
    return {_where(c) for c in scan(fn).calls if launch_config(c) is not None}


def _where(c: ci.Cursor) -> tuple:
    return (c.extent.start.file.name if c.extent.start.file else "", c.extent.start.offset)


class DeviceSources:
    """The device functions defined in the files ``paths`` (``translate --device-sources``), by
    USR (alike in every translation unit for a function with external linkage), each file parsed
    as CUDA with the same macros and include directories, when a call first needs one (so a file
    that needs none is not parsed, and an error of those files shows only where it matters).
    Where a file of the program calls a device function that is only declared there (nvcc
    -rdc=true links it), polypy inlines the definition found here; the definition's cursors keep
    their own file's locations."""

    def __init__(self, paths: tuple[str, ...] = (), defines: dict[str, str] | None = None,
                 include_dirs: tuple[str, ...] = ()):
        self.paths = paths
        self.defines = defines
        self.include_dirs = include_dirs
        self.found: dict[str, ci.Cursor] | None = None

    def get(self, usr: str) -> ci.Cursor | None:
        if not self.paths:
            return None
        if self.found is None:
            self.found = _device_definitions(self.paths, self.defines, self.include_dirs)
        return self.found.get(usr)

    def files(self) -> set[str]:
        """The files whose definitions were read so far."""
        return set(self.paths) if self.found is not None else set()


def _device_definitions(paths: tuple[str, ...], defines: dict[str, str] | None,
                        include_dirs: tuple[str, ...]) -> dict[str, ci.Cursor]:
    out: dict[str, ci.Cursor] = {}
    for path in paths:
        tu = parse_translation_unit(path, "cuda", defines=defines, include_dirs=include_dirs)
        todo = list(tu.cursor.get_children())
        while todo:
            d = todo.pop(0)
            if d.location.file is None or d.location.file.name != path:
                continue
            if d.kind in (CK.NAMESPACE, CK.LINKAGE_SPEC):
                todo += list(d.get_children())
            elif d.kind == CK.FUNCTION_DECL and is_device_decl(d) and d.is_definition() and \
                    function_body(d) is not None and d.linkage == ci.LinkageKind.EXTERNAL:
                out.setdefault(d.get_usr(), d)
    return out
