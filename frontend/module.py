"""A whole translation unit → ``polypy.ir.Module``: kernels, module globals and host code
(``ModuleBuilder``; ``frontend.parse`` parses the file and runs it per pass).

Kernels are the ``__global__`` function definitions of the user's files. Kernel templates are
instantiated where host code launches them (``scale<256><<<g, b>>>(...)``: clang has already
instantiated the body; we lower that instance). Host code is recorded as spans to rewrite
(``polypy.ir.host``), never re-parsed by hand.
"""
from __future__ import annotations

import dataclasses
import pathlib

import clang.cindex as ci

from polypy.analysis.grid_sync import check_grid_syncs, refuse_plain_launches
from polypy.analysis.uniformity import check_barriers
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.passes.guard_early_returns import guard_early_returns
from polypy.ir.depth import MAX_DEPTH, check_depth, too_deep
from polypy.ir.host import CopySpan, DeviceSpan, HostFile, HostProgram, HostStub, IndirectLaunch, LaunchSite
from polypy.sources import read_source

from frontend.bases import learn as learn_bases
from frontend.function_scan import scan
from frontend.clang_setup import cursor_loc, deepest_cursor, preorder, spelled_extent, top_cursors
from frontend.host_called_device import host_called_device_functions
from frontend.kernel_defaults import default_argument
from frontend.host_copies import CopyDecision, share_copies, written_arguments
from frontend.host_spans import (
    CUDA_HEADERS, OffsetMap, function_id_spans, include_span, is_runtime_header, symbol_name_spans,
)
from frontend.kernel_values import DeviceSources, host_stub, is_template_kernel, kernel_values, launched_callees, \
    named_as_values, static_bytes, template_stub
from frontend.closures import argument_text, closure_declaration, file_parts, host_closure, launch_forwards
from frontend.instance_places import closure_home, later_places
from frontend.launch_shapes import LaunchShapes
from frontend.host_templates import (in_class_members, instance_condition, instance_key, is_instance, is_pattern,
                                     template_args as _template_args)
from frontend.launch_tokens import refuse_dependent_template_launch
from frontend.merge_loops import loop_span, merge_loops
from frontend.lower.textures import hidden_arguments
from frontend.lower.pointer_choice import lower_until_settled
from frontend.lower import (
    CK, KernelBuilder, ModuleContext, decl_key, function_body, has_attr, is_device_decl, is_host_decl,
    is_kernel_decl, is_prelude_decl, sanitize,
)

_CONTAINERS = (CK.NAMESPACE, CK.LINKAGE_SPEC, CK.UNEXPOSED_DECL)


# Names of the references to kernel template instances appended to a file (``frontend.parse``).
INSTANCE_PREFIX = "__polypy_instance_"


def _lower_kernel(ctx: ModuleContext, cursor: ci.Cursor, name: str) -> n.Kernel:
    """``KernelBuilder(...).build()``, again while a round finds pointer variables pointing into
    more buffers than it was lowered for (``pointer_choice``); where the lowering's recursion
    gives out (input far deeper than ``MAX_DEPTH``), the refusal names the deepest place of the
    kernel's source. (The RecursionError may surface as another error: libclang's child
    callbacks swallow it.)"""
    hidden = list(ctx.textures.get(name, []))
    learn_bases(cursor)  # the bases of class template instances its code converts to (frontend.bases)

    def make(sets: dict) -> KernelBuilder:
        ctx.textures[name] = list(hidden)  # a new round makes the hidden parameters again
        return KernelBuilder(ctx, cursor, name, sets)

    try:
        return lower_until_settled(make, cursor_loc(cursor))
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised unless the input is too deep
        failure = exc
    deepest = deepest_cursor(cursor)
    if deepest[1] <= MAX_DEPTH:
        raise failure
    raise too_deep(MAX_DEPTH + 1, MAX_DEPTH, cursor_loc(deepest[0]), at_least=True) from None


class ModuleBuilder:
    def __init__(self, tu: ci.TranslationUnit, path: str, language: str, text: str | None,
                 original: str | None = None, part: bool = False, elsewhere: DeviceSources | None = None,
                 device_view: dict[str, n.Kernel] | None = None):
        self.tu = tu
        self.device_view = device_view or {}  # the kernels the host program is built against, by name
        self.part = part  # a part of a program (translate -c): host code even without any
        self.path = path
        self.language = language
        self.main_text = original if original is not None else text
        self.ctx = ModuleContext(language)
        self.ctx.device_definitions = elsewhere or DeviceSources()
        self.user_files: dict[str, None] = {}
        self.dependent_sites: set[tuple[str, int]] = set()
        self.valued: list[ci.Cursor] = []  # kernel template instances host code names as values
        self.explicit: list[ci.Cursor] = []  # kernel template instances the file instantiates explicitly
        self.later: dict[str, ci.Cursor] = {}  # kernel template instances placed after their template (instance_places)
        self.instance_stubs: dict[tuple, tuple[HostStub, ...]] = {}
        self._top_level: list[ci.Cursor] | None = None
        self._linkage_starts: dict[tuple[str, int, int], int] = {}
        self.host_called: set[tuple[str, int]] = set()  # device functions host text calls (host_program)
        self.forwards: dict[str, list] = {}  # by file: HostFile.forwards (closure_forwards)

    # -- which cursors are the user's
    def is_user(self, c: ci.Cursor) -> bool:
        # The system-header test first: it is one libclang call, where the file takes four, and it
        # rejects most of a translation unit (the C++ library, polypy's prelude and runtime header).
        loc = c.location
        if loc.is_in_system_header or loc.file is None or is_prelude_decl(c):
            return False
        return True

    def top_level(self) -> list[ci.Cursor]:
        """The user's top-level declarations, in order (computed once: the walk visits every
        declaration of the headers too)."""
        if self._top_level is None:
            self._top_level = self._user_declarations()
        return self._top_level

    def _user_declarations(self) -> list[ci.Cursor]:
        out: list[ci.Cursor] = []

        def visit(parent: ci.Cursor) -> None:
            for c in (top_cursors(self.tu) if parent == self.tu.cursor else parent.get_children()):
                if c.kind in _CONTAINERS:
                    # A namespace or extern "C" block opened in a system header (namespace std)
                    # holds that header's declarations: each reopening is a cursor of its own.
                    if c.location.is_in_system_header:
                        continue
                    visit(c)
                    inner = list(c.get_children()) if c.kind == CK.LINKAGE_SPEC else []
                    if len(inner) == 1 and inner[0].extent.end.offset == c.extent.end.offset:
                        # `extern "C" __global__ void k(...) {...}`: the kernel's span starts at
                        # `extern`, so that its translation (static block functions) is not C-linked.
                        self._linkage_starts[_extent_key(inner[0])] = c.extent.start.offset
                elif self.is_user(c):
                    out.append(c)

        visit(self.tu.cursor)
        return out

    def build(self) -> n.Module:
        decls = self.top_level()
        # Module globals first, so their names are reserved before any kernel names a local.
        for d in decls:
            if d.kind == CK.VAR_DECL and (has_attr(d, CK.CUDACONSTANT_ATTR, "polypy_constant")
                                          or has_attr(d, CK.CUDADEVICE_ATTR, "polypy_device")):
                self.ctx.global_array(d, cursor_loc(d))
        kernels: dict[tuple, tuple[ci.Cursor, str]] = {}
        for d in decls:
            if d.kind == CK.FUNCTION_DECL and is_kernel_decl(d) and d.is_definition():
                kernels[decl_key(d)] = (d, self.instance_name(d, kernels))  # overloads: k, k_1
        for d in decls:
            if d.kind == CK.VAR_DECL and d.spelling.startswith(INSTANCE_PREFIX):
                for ref in preorder(d):
                    if ref.kind == CK.DECL_REF_EXPR and ref.referenced is not None and is_kernel_decl(ref.referenced):
                        target = ref.referenced.get_definition() or ref.referenced
                        self.explicit.append(target)  # its explicit instantiation stays in the host text
                        key = self.kernel_key(target)
                        if key not in kernels:
                            kernels[key] = (target, self.instance_name(target, kernels))
        launches_by_file: dict[str, list[tuple[ci.Cursor, ci.Cursor, ci.Cursor | None]]] = {}
        self.indirect_by_file: dict[str, list[ci.Cursor]] = {}
        host_functions = [d for d in decls + in_class_members(decls) if self.is_host_function(d)]
        self.shapes = LaunchShapes(host_functions, self.file_text)
        for call, instance in self.launch_calls(host_functions):
            target = self.launched_kernel(call)
            if target is None:  # through the host stub (kernel_values); once per site (host templates)
                refuse_dependent_template_launch(call)
                sites = self.indirect_by_file.setdefault(call.location.file.name, [])
                if all(c.extent.start.offset != call.extent.start.offset for c in sites):
                    sites.append(call)
                continue
            key = self.kernel_key(target)
            if key not in kernels:
                kernels[key] = (target, self.instance_name(target, kernels))
            launches_by_file.setdefault(call.location.file.name, []).append((call, target, instance))
        for target in self.valued:
            if self.kernel_key(target) not in kernels:
                kernels[self.kernel_key(target)] = (target, self.instance_name(target, kernels))
        self.ctx.names.taken.update(name for _, name in kernels.values())

        def kernel_named(target: ci.Cursor) -> str:  # a kernel launched from device code
            key = self.kernel_key(target)
            if key not in kernels:
                kernels[key] = (target, self.instance_name(target, kernels))
                self.ctx.names.taken.add(kernels[key][1])
            return kernels[key][1]

        self.ctx.kernel_named = kernel_named
        built: list[n.Kernel] = []
        names: dict[tuple, str] = {}
        pending = list(kernels.items())
        while pending:  # kernels launched only from device code join the list while it is lowered
            key, (cursor, name) = pending.pop(0)
            known = len(kernels)
            kernel = _lower_kernel(self.ctx, cursor, name)
            pending += list(kernels.items())[known:]
            check_depth(kernel)
            check_grid_syncs(kernel)
            kernel = guard_early_returns(kernel)  # `if (id > n) return;` before a barrier: checked at run time
            check_barriers(kernel)
            built.append(kernel)
            names[key] = name
        by_ir = {k.name: self.device_view.get(k.name, k) for k in built}
        self.later = later_places(kernels.values(), decls)  # instances placed after their argument types
        self.stubs = {key: host_stub(cursor, names[key], self.texture_args(names[key]), *static_bytes(by_ir[names[key]]))
                      for key, (cursor, _) in kernels.items() if not is_template_kernel(cursor)}
        # Host stubs of kernel template instances where host code needs them: the template's
        # instances named as values, and those of a template the file instantiates explicitly.
        stubbed = {decl_key(c)[:3] for c in self.valued + self.explicit}
        for key, (cursor, _) in kernels.items():
            if is_template_kernel(cursor) and decl_key(cursor)[:3] in stubbed:
                args = _template_args(cursor)
                if any(a.startswith("arg") or "(" in a for a in args):
                    raise UserError(f"kernel template instance '{cursor.spelling}<{', '.join(args)}>' is named in host "
                                    "code, and its template arguments cannot be written in C++ source (a pack, a "
                                    "template template argument, an unnamed or local type): not supported",
                                    cursor_loc(cursor))
                stub = template_stub(cursor, args, names[key], self.texture_args(names[key]),
                                     *static_bytes(by_ir[names[key]]))
                if cursor.location.file is not None and cursor.location.file.name != self.path:
                    stub = dataclasses.replace(stub, storage="template <> inline")  # in a header
                self.instance_stubs.setdefault(decl_key(cursor)[:3], ())
                self.instance_stubs[decl_key(cursor)[:3]] += (stub,)
        has_main = any(d.kind == CK.FUNCTION_DECL and d.spelling == "main" and d.is_definition() for d in decls)
        host = None
        if has_main or launches_by_file or self.indirect_by_file or self.part \
                or self.defines_host_code(decls, host_functions):
            # Per launch outside host templates: which arguments its kernel writes through.
            written = {(call.location.file.name, call.extent.start.offset):
                       written_arguments(by_ir[names[self.kernel_key(target)]])
                       for calls in launches_by_file.values() for call, target, instance in calls if instance is None}
            copies = share_copies([fn for fn in host_functions if self.is_user(fn)],
                                  lambda call: written.get((call.location.file.name, call.extent.start.offset)))
            loops = merge_loops([fn for fn in host_functions if self.is_user(fn)],
                                lambda call: self.launch_config(call) is not None, self.mergeable_launch)
            host = self.host_program(decls, launches_by_file, names, has_main, copies, loops)
            refuse_plain_launches(host.launches, list(by_ir.values()))
            valued = {names.get(self.kernel_key(k.get_definition() or k)) for k in named_as_values(decls, self.launch_config)}
            host = dataclasses.replace(host, as_values=frozenset(v for v in valued if v is not None), part=self.part)
        return n.Module(tuple(built), tuple(self.ctx.globals.values()), source=self.path, host=host)

    def defines_host_code(self, decls: list[ci.Cursor], host_functions: list[ci.Cursor]) -> bool:
        """Whether the main file defines host functions or host variables: a ``.cu`` file of host
        code alone (Rodinia's ``util/cuda/cuda.cu``: ``checkCUDAError``, ``setdevice``) is a part of
        a program, linked with its other objects, not a kernel library (which would drop them)."""
        for d in host_functions:
            if d.location.file is not None and d.location.file.name == self.path:
                return True
        for d in decls:
            if (d.kind == CK.VAR_DECL and d.is_definition() and d.location.file is not None
                    and d.location.file.name == self.path and not d.spelling.startswith(INSTANCE_PREFIX)
                    and not d.type.get_canonical().spelling.split("<")[0].endswith("texture")
                    and not has_attr(d, CK.CUDACONSTANT_ATTR, "polypy_constant")
                    and not has_attr(d, CK.CUDADEVICE_ATTR, "polypy_device")
                    and not has_attr(d, CK.CUDASHARED_ATTR, "polypy_shared")):
                return True
        return False

    # -- kernels and launches
    def is_host_function(self, d: ci.Cursor) -> bool:
        if d.kind not in (CK.FUNCTION_DECL, CK.CXX_METHOD, CK.FUNCTION_TEMPLATE, CK.CONSTRUCTOR, CK.DESTRUCTOR,
                          CK.CONVERSION_FUNCTION):
            return False
        if is_kernel_decl(d) or (is_device_decl(d) and not is_host_decl(d)):
            return False
        return function_body(d) is not None

    @staticmethod
    def launch_config(call: ci.Cursor) -> ci.Cursor | None:
        for ch in call.get_children():
            if ch.kind == CK.CALL_EXPR and ch.spelling in ("__cudaPushCallConfiguration", "cudaConfigureCall"):
                return ch
        return None

    def launch_calls(self, host_functions: list[ci.Cursor]) -> list[tuple[ci.Cursor, ci.Cursor | None]]:
        """The launches host code makes: (launch, the host function template instance it is in,
        or None outside templates).

        A launch inside a host function template (``k<B><<<g, B>>>(...)`` in ``template <int B>
        void run(...)``) depends on the template's parameters: clang resolves it in each
        instance's body, which the calls of the instance lead to (``run<128>(...)``), as do the
        file's explicit instantiations (``template void run<64>(float*);``). So instance bodies
        are walked too, and a launch is listed once per instance (see ``LaunchSite.when``).
        """
        found: list[tuple[ci.Cursor, ci.Cursor | None]] = []
        seen: set[tuple] = set()
        dependent: dict[tuple, tuple[ci.Cursor, ci.Cursor]] = {}
        visited: set[tuple] = set()
        todo: list[tuple[ci.Cursor, ci.Cursor | None]] = [(fn, None) for fn in host_functions]
        for d in self.top_level():
            if d.kind == CK.VAR_DECL and d.spelling.startswith(INSTANCE_PREFIX):
                todo += [(r.referenced, None) for r in preorder(d) if r.kind == CK.DECL_REF_EXPR]
        while todo:
            fn, instance = todo.pop()
            if instance is None and is_instance(fn):
                # An instance reached from an explicit instantiation.
                fn = fn.get_definition()
                if fn is None or not self.is_host_function(fn) or not self.is_user(fn):
                    continue
                key = instance_key(fn, decl_key(fn))
                if key in visited:
                    continue
                visited.add(key)
                instance = fn
            self.valued += kernel_values(fn, launched_callees(fn, self.launch_config))
            for call in scan(fn).calls:  # (frontend.function_scan)
                site = (call.location.file.name if call.location.file else "", spelled_extent(call)[0])
                if self.launch_config(call) is not None:
                    target = call.referenced
                    if is_pattern(fn) and (target is None or not is_kernel_decl(target)):
                        dependent.setdefault(site, (call, fn))  # resolved in the instances' bodies
                        continue
                    key = site + (self.kernel_key(target) if target is not None else (),) + \
                        (instance_key(instance, decl_key(instance)) if instance is not None else ())
                    if key not in seen:
                        seen.add(key)
                        found.append((call, instance))
                    continue
                callee = call.referenced
                if callee is None or not is_instance(callee):
                    continue
                definition = callee.get_definition()
                if definition is None or not self.is_host_function(definition) or not self.is_user(definition):
                    continue
                ikey = instance_key(definition, decl_key(definition))
                if ikey not in visited:
                    visited.add(ikey)
                    todo.append((definition, definition))
        self.dependent_sites = set(dependent)  # launches that pick their kernel by the template's arguments
        covered = {(c.location.file.name if c.location.file else "", c.extent.start.offset) for c, _ in found}
        for site, (call, fn) in dependent.items():
            if site not in covered:
                what = "a host function template" if fn.kind == CK.FUNCTION_TEMPLATE else "a member of a class template"
                raise UserError(f"kernel launch in {what} that this program never instantiates where polypy sees "
                                "it (polypy translates the launches of instances that host code calls or that the "
                                "file instantiates explicitly)", cursor_loc(call))
        return found

    def launched_kernel(self, call: ci.Cursor) -> ci.Cursor | None:
        """The definition of the kernel a launch launches; None for a launch through the host
        stub: of a kernel defined in another file, or through a pointer (``kernel_values``)."""
        target = call.referenced
        if target is None or not is_kernel_decl(target):
            return None
        definition = target.get_definition() or target
        if function_body(definition) is None:
            if is_template_kernel(target):
                raise UserError(f"kernel template instance '{target.spelling}' is launched but not defined in this "
                                "file: kernel templates instantiated in another file (separate compilation) are "
                                "not supported; define the template in a header both files include",
                                cursor_loc(call))
            return None
        return definition

    def kernel_key(self, cursor: ci.Cursor) -> tuple:
        return decl_key(cursor) + tuple(self.template_args(cursor))

    def template_args(self, cursor: ci.Cursor) -> list[str]:
        """A kernel instance's template arguments as text, a lambda's closure as its record's name
        (``frontend.closures``: two instances of a function template make two closures, which
        clang spells alike; the second is refused there)."""
        args = _template_args(cursor)
        for i in range(len(args)):
            if cursor.get_template_argument_kind(i) == ci.TemplateArgumentKind.TYPE:
                closure = closure_declaration(cursor.get_template_argument_type(i))
                if closure is not None:
                    args[i] = host_closure(closure, self.ctx.closures).name
        return args

    def instance_name(self, cursor: ci.Cursor, existing: dict) -> str:
        args = [a[len("polypy_"):] if a.startswith("polypy_lambda_") else a for a in self.template_args(cursor)]
        base = cursor.spelling if not args else cursor.spelling + "_" + "_".join(sanitize(a) for a in args)
        taken = {name for _, name in existing.values()}
        name, i = base, 0
        while name in taken:
            i += 1
            name = f"{base}_{i}"
        return name

    # -- host program
    def mergeable_launch(self, call: ci.Cursor) -> str | None:
        """None if a launch may run in a host loop merged into one parallel region
        (``frontend.merge_loops``), else why not."""
        if self.launched_kernel(call) is None:
            return "a launch through the kernel's host stub (a pointer, or a kernel of another file)"
        config = list(self.launch_config(call).get_children())[1:]  # type: ignore[union-attr]
        if len(config) > 3 and not _is_default(config[3]):
            return "a launch on a stream"
        return None

    def host_program(self, decls, launches_by_file, names: dict[tuple, str], has_main: bool,
                     copies: list[CopyDecision], loops: list = ()) -> HostProgram:
        files: dict[str, HostFile] = {}
        self.host_called = host_called_device_functions(decls)  # kept in the host text
        by_file: dict[str, list[ci.Cursor]] = {}
        for d in decls:
            by_file.setdefault(d.location.file.name, []).append(d)
        inclusions = [c for c in top_cursors(self.tu) if c.kind == CK.INCLUSION_DIRECTIVE]
        # polypy's headers with content are inlined and rewritten like the user's (their own
        # includes of other CUDA headers become notes too).
        runtime_headers = {c.get_included_file().name for c in inclusions
                           if c.get_included_file() is not None and is_runtime_header(c.get_included_file().name)
                           and pathlib.PurePath(c.get_included_file().name).name not in CUDA_HEADERS}
        for fname in set(by_file) | set(launches_by_file) | set(self.indirect_by_file) | {self.path} | runtime_headers:
            text = self.file_text(fname)
            conv = OffsetMap(text, None if fname == self.path and self.main_text is not None
                              else pathlib.Path(fname).read_bytes())
            launches = self.launch_sites(launches_by_file.get(fname, []), names, text, conv)
            spans = tuple(self.device_span(d, names, conv) for d in by_file.get(fname, [])
                          if self.device_span(d, names, conv) is not None)
            spans += symbol_name_spans(by_file.get(fname, []), decls, conv, self.is_host_function)
            spans += function_id_spans(by_file.get(fname, []), conv)
            includes = tuple(include_span(c, conv, self.tu) for c in inclusions
                             if c.location.file is not None and c.location.file.name == fname)
            copy_spans = tuple(self.copy_span(c, conv) for c in copies if c.call.location.file.name == fname)
            indirect = tuple(self.indirect_launch(c, conv) for c in self.indirect_by_file.get(fname, []))
            merges = tuple(loop_span(d, text, conv.char) for d in loops
                           if d.loop.location.file is not None and d.loop.location.file.name == fname)
            placed = tuple(sorted((conv.char(self._linkage_starts.get(_extent_key(d), d.extent.start.offset)), name)
                                  for name, d in self.later.items() if d.extent.start.file.name == fname))
            closures, records = self.closure_parts(fname, decls, launches, indirect, conv)
            files[fname] = HostFile(fname, text, launches, spans, includes, copy_spans,  # type: ignore[arg-type]
                                    indirect, merges, placed, records, closures,
                                    tuple(sorted(set(self.forwards.pop(fname, ())))))
        return HostProgram(self.path, files, has_main)

    @staticmethod
    def copy_span(c: CopyDecision, conv: OffsetMap) -> CopySpan:
        """A copy decision as spans of its file: the call, and each renamed function's name."""
        renames = tuple((conv.char(r.extent.start.offset), conv.char(r.extent.start.offset) + len(r.spelling), name)
                        for r, name in c.renames)
        return CopySpan(conv.char(c.call.extent.start.offset), conv.char(c.call.extent.end.offset), c.device, c.host,
                        conv.slice(c.count.extent), c.shared, c.why, cursor_loc(c.call), c.direction, renames)

    def file_text(self, fname: str) -> str:
        if fname == self.path and self.main_text is not None:
            return self.main_text
        return read_source(fname)

    def texture_args(self, kernel: str) -> tuple[str, ...]:
        """What the host stub of ``kernel`` passes for the kernel's hidden parameters
        (``frontend.lower.textures.hidden_param``): C text where ``{k}`` stands for the stub's
        argument k (``codegen.c.module.stub_definition`` fills it in)."""
        return tuple(launch for _, _, launch in self.ctx.textures.get(kernel, ()))

    def launch_parts(self, call: ci.Cursor, conv: OffsetMap) -> tuple[list[str | None], list[str], list[ci.Cursor],
                                                                         list[ci.Cursor]]:
        """A ``<<<...>>>`` launch's configuration texts (None: a default), its arguments' texts
        (as written, also in a macro's argument), the call's children and the configuration's
        cursors; refuses launches in macros and default arguments."""
        loc = cursor_loc(call)
        if "<<<" not in [t.spelling for t in call.get_tokens()]:
            raise UserError("kernel launches written inside macros are not supported", loc)
        children = list(call.get_children())
        config = self.launch_config(call)
        assert config is not None
        cfg = list(config.get_children())[1:]
        texts = [None if _is_default(arg) else conv.spelled(arg) for arg in cfg]
        args = []
        for i, a in enumerate(children[2:]):
            args.append(default_argument(call, i, loc) if _is_default(a) else self.spelled_argument(a, conv))
        if texts[0] is None or texts[1] is None:
            raise UserError("a launch needs a grid and a block shape", loc)
        return texts, args, children, cfg

    def spelled_argument(self, a: ci.Cursor, conv: OffsetMap) -> str:
        """A launch argument as written; where it makes a lambda a kernel takes, with the record
        of its captures made there (``frontend.closures``)."""
        return argument_text(self.ctx.closures.values(), a, conv)

    def closure_forwards(self, call: ci.Cursor, target: ci.Cursor, names, conv: OffsetMap) -> None:
        """``HostFile.forwards`` of a launch in a host function template (``frontend.closures``)."""
        home = closure_home(call, self.top_level())
        at = None if home is None else conv.char(self._linkage_starts.get(_extent_key(home), home.extent.start.offset))
        self.forwards.setdefault(call.location.file.name, []).extend(
            launch_forwards(call, self.template_args(target), names[self.kernel_key(target)], at))

    def closure_parts(self, fname: str, decls: list[ci.Cursor], launches, indirect, conv: OffsetMap
                      ) -> tuple[tuple[tuple[int, int, str], ...], tuple[tuple[int, str], ...]]:
        """``HostFile.closures`` and ``HostFile.records`` of file ``fname`` (``frontend.closures``),
        each record before the top-level declaration making its lambda."""
        def place(lam: ci.Cursor) -> int:
            home = closure_home(lam, decls)
            if home is None:
                raise UserError("a lambda passed to a kernel must be made in a function at the file's global scope",
                                cursor_loc(lam))
            return self._linkage_starts.get(_extent_key(home), home.extent.start.offset)
        inside = [(l.start, l.end) for l in launches] + [(l.start, l.end) for l in indirect]
        return file_parts(self.ctx.closures.values(), fname, inside, conv, place)

    def indirect_launch(self, call: ci.Cursor, conv: OffsetMap) -> IndirectLaunch:
        """A launch through the host stub (``kernel_values``)."""
        cfg, args, children, _ = self.launch_parts(call, conv)
        return IndirectLaunch(conv.char(call.extent.start.offset), conv.char(call.extent.end.offset),
                              conv.slice(children[0].extent), cfg[0], cfg[1], cfg[2] if len(cfg) > 2 else None,
                              cfg[3] if len(cfg) > 3 else None, tuple(args), cursor_loc(call))

    def launch_site(self, call: ci.Cursor, target: ci.Cursor, names, text: str, conv: OffsetMap) -> LaunchSite:
        loc = cursor_loc(call)
        texts, args, children, cfg = self.launch_parts(call, conv)
        # What the kernel's hidden parameters receive (texture references' bindings, surfaces' memory:
        # frontend.lower.textures.hidden_param), in terms of the launch's arguments.
        args += hidden_arguments(self.ctx.textures.get(names[self.kernel_key(target)], ()), children[2:], args)
        grid, block = texts[0], texts[1]
        start, end = spelled_extent(call)
        return LaunchSite(names[self.kernel_key(target)], conv.char(start), conv.char(end), grid, block,
                          texts[2] if len(texts) > 2 else None, texts[3] if len(texts) > 3 else None,
                          tuple(args), loc, **self.launch_shapes(call, cfg[0], cfg[1]))

    def launch_sites(self, calls: list[tuple[ci.Cursor, ci.Cursor, ci.Cursor | None]], names, text: str,
                     conv: OffsetMap) -> tuple[LaunchSite, ...]:
        """The launch sites of one file. A site in a host function template whose instances launch
        different kernels is one ``LaunchSite`` per kernel, each with the condition on the
        template's parameters under which it is the one launched."""
        by_site: dict[int, dict[str, list[tuple[ci.Cursor, ci.Cursor, ci.Cursor | None]]]] = {}
        for call, target, instance in calls:
            kernel = names[self.kernel_key(target)]
            by_site.setdefault(spelled_extent(call)[0], {}).setdefault(kernel, []).append((call, target, instance))
        out: list[LaunchSite] = []
        for kernels in by_site.values():
            for group in kernels.values():
                call, target, _ = group[0]
                site = self.launch_site(call, target, names, text, conv)
                if len(kernels) > 1 or (call.location.file.name, spelled_extent(call)[0]) in self.dependent_sites:
                    when = " || ".join(f"({self.written_condition(c, t) if i is None else self.instance_condition(c, i)})"
                                       for c, t, i in group)
                    site = dataclasses.replace(site, when=when)
                    self.closure_forwards(call, target, names, conv)
                out.append(site)
        return tuple(out)

    def written_condition(self, call: ci.Cursor, target: ci.Cursor) -> str:
        """``__is_same(scalar_t, float)``: a launch ``k<scalar_t><<<...>>>`` written once in a macro's
        argument that the macro expands several times with ``scalar_t`` naming different types
        (``AT_DISPATCH_FLOATING_TYPES(..., [&] { ... })``: one lambda per type), as a test on the
        template arguments as written, which each expansion reads in its own scope."""
        callee = next(iter(call.get_children()), None)
        while callee is not None and callee.kind == CK.UNEXPOSED_EXPR:
            callee = next(iter(callee.get_children()), None)
        written = [c for c in callee.get_children()] if callee is not None and callee.kind == CK.DECL_REF_EXPR else []
        values = _template_args(target)
        if not written or len(written) != len(values) or any(c.kind != CK.TYPE_REF for c in written):
            return self.instance_condition(call, None)
        conv = OffsetMap(read_source(call.location.file.name))
        terms = [f"__is_same({conv.spelled(c)}, {value})" for c, value in zip(written, values)]
        return " && ".join(terms)

    def instance_condition(self, call: ci.Cursor, instance: ci.Cursor | None) -> str:
        """The test on the template's parameters under which ``call`` (in a template's body)
        launches what it launches in ``instance`` (``frontend.host_templates``)."""
        return instance_condition(call, instance, self.top_level(), lambda d: host_closure(d, self.ctx.closures).name)

    def launch_shapes(self, call: ci.Cursor, grid: ci.Cursor, block: ci.Cursor) -> dict:
        """``LaunchSite``'s grid_shape, block_shape, grid_from, block_from (``frontend.launch_shapes``)."""
        g, b = self.shapes.of(call, grid), self.shapes.of(call, block)
        return dict(grid_shape=g.shape, block_shape=b.shape, grid_from=g.why, block_from=b.why)

    def device_span(self, d: ci.Cursor, names, conv: OffsetMap) -> DeviceSpan | None:
        if d.kind in (CK.FUNCTION_DECL, CK.FUNCTION_TEMPLATE):
            if is_kernel_decl(d):
                kernels = tuple(name for key, name in names.items() if key[:3] == decl_key(d)[:3])
                stub = None
                if not is_template_kernel(d):
                    stub = self.stubs.get(self.kernel_key(d)) if kernels else host_stub(d)
                    if stub is not None and kernels and d.location.file.name != self.path and not stub.storage:
                        # Defined in a header: every file including it defines the stub (C++ inline).
                        stub = dataclasses.replace(stub, storage="inline")
                start = self._linkage_starts.get(_extent_key(d), d.extent.start.offset)
                head, stubs = None, ()
                body = function_body(d)
                if d.kind == CK.FUNCTION_TEMPLATE and kernels and body is not None \
                        and decl_key(d)[:3] in self.instance_stubs:
                    # The template's declaration as written stays: its instances' stubs specialize it.
                    head = self.file_text(d.location.file.name)[conv.char(start):conv.char(body.extent.start.offset)]
                    head = head.rstrip() + ";"
                    stubs = self.instance_stubs.get(decl_key(d)[:3], ())
                return DeviceSpan(conv.char(start), conv.char(d.extent.end.offset), "kernel", kernels, stub, head,
                                  stubs, tuple(k for k in kernels if k in self.later))
            if is_device_decl(d) and not is_host_decl(d) and \
                    (d.location.file.name, d.location.offset) not in self.host_called:
                return DeviceSpan(conv.char(d.extent.start.offset), conv.char(d.extent.end.offset), "device")
        return None

def _is_default(arg: ci.Cursor) -> bool:
    return arg.location.file is None and not list(arg.get_children())


def _extent_key(d: ci.Cursor) -> tuple[str, int, int]:
    f = d.extent.start.file
    return (f.name if f is not None else "", d.extent.start.offset, d.extent.end.offset)
