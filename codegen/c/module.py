"""Whole output files of the C backend: kernel libraries and translated whole programs.

``emit_kernels``: the kernels of a file without host code, as one C or C++ file (prelude, module
globals, block function and launcher per kernel); ``codegen.c.build`` compiles it into a shared
library callable from Python.

``emit_program``: a CUDA program with host code, as ONE self-contained C++ file that compiles
with ``c++ -O3 -march=native -fopenmp OUT -lm``. Host code stays as written; the frontend recorded, per
source file, the spans to rewrite (``polypy.ir.host``):

* at the top: polypy's CUDA runtime (``polypy/runtime/cuda_runtime.h``) and the kernel support
  prelude; ``#include <cuda_runtime.h>`` (and other CUDA headers) are replaced by a note;
* ``#include "x.cuh"`` of the user's files: the file's text, rewritten the same way (once per
  file, like an include guard); other includes are kept;
* each kernel definition: the translated code of the kernels it defines (a template: each
  instance launched or instantiated); device-only functions: removed (they were inlined);
  ``__host__ __device__`` functions are kept for the host;
* each ``K<<<grid, block, shmem, stream>>>(args)``: ``K_launch(dim3(grid), dim3(block), shmem,
  args)``; launchers return when every block is done, so launches run in program order. A launch
  given a stream goes through ``polypy_rt_on_stream(stream, K_launch)``, which records it into a
  graph instead while the stream captures (``polypy/runtime/parts/graphs.h``).
"""
from __future__ import annotations

import dataclasses
import os
import re
from importlib import resources
from typing import Mapping, Sequence

from polypy.cccl import THRUST_CUDA_SYSTEM_INCLUDES, program_flags
from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.host import HostFile, HostProgram, HostStub, needs_stub
from polypy.ir.visitor import walk
from polypy.sources import read_source
from polypy.stack import on_big_stack

from codegen.c.kernel import KernelCode, Options, emulated_launcher
from codegen.c.merged_loops import merged_loop_edits
from codegen.c.shared_limits import max_dynamic_variable, shared_limits
from codegen.c.render import c_type, literal
from codegen.c.templates import fp_contract_off, prelude, render_template
from polypy.ir.versions import KernelVersions

from codegen.c.versions import emit_kernel


def runtime_header(unused: Mapping[str, Sequence[tuple[int, int]]] | None = None) -> str:
    """polypy's CUDA runtime header (package data ``polypy/runtime/cuda_runtime.h``), with its
    parts (``#include "parts/....h"`` lines of polypy's own headers) pasted where they are included,
    so that a translated program is one self-contained file.

    ``unused``: per header (its real path), line ranges (1-based, inclusive) of declarations the
    program does not use (``frontend.runtime_slice``): left out, with the comment just above each."""
    return _pasted(resources.files("polypy.runtime"), "cuda_runtime.h", unused or {})


# The line that stands for the runtime while the program's use of it is found: the runtime's
# headers are then read as files (``emit_program(runtime=RUNTIME_INCLUDE)``, ``with_runtime``).
RUNTIME_INCLUDE = '#include "cuda_runtime.h" /* polypy runtime */'


# Likewise the kernel prelude, read as this file of the runtime's directory.
PRELUDE_FILE = "polypy_prelude.h"
PRELUDE_INCLUDE = f'#include "{PRELUDE_FILE}" /* polypy kernel support */'


# Above a runtime pasted in part: its comments (what each declaration does and why) are in its sources.
RUNTIME_NOTE = ("/* polypy's CUDA runtime and kernel support, the declarations this program uses (documented in "
                "polypy/runtime/cuda_runtime.h, its parts/ and codegen/templates/c_prelude.h.j2) */")


def with_runtime(text: str, unused: Mapping[str, Sequence[tuple[int, int]]] | None) -> str:
    """A program emitted with ``RUNTIME_INCLUDE`` (and ``PRELUDE_INCLUDE``) with the runtime and
    the prelude pasted there, less ``unused``."""
    at = text.index(RUNTIME_INCLUDE)
    note = RUNTIME_NOTE + "\n" if unused else ""
    # What is left of the runtime is read in its sources (the note): no blank lines between its pieces.
    blanks = _no_blank if unused else _one_blank
    text = text[:at] + note + blanks(runtime_header(unused)).rstrip("\n") + text[at + len(RUNTIME_INCLUDE):]
    lines = prelude().rstrip("\n").split("\n")
    path = os.path.realpath(str(resources.files("polypy.runtime").joinpath(PRELUDE_FILE)))
    gone = _left_out(lines, (unused or {}).get(path, ()))
    kept = blanks("\n".join(line for i, line in enumerate(lines) if i not in gone))
    at = text.index(PRELUDE_INCLUDE)
    return text[:at] + kept + text[at + len(PRELUDE_INCLUDE):]


def _no_blank(text: str) -> str:
    """``text`` without blank lines (but one that ends a macro's continued line)."""
    out: list[str] = []
    for line in text.split("\n"):
        if line.strip() or out and out[-1].rstrip().endswith("\\"):
            out.append(line)
    return "\n".join(out)


def _one_blank(text: str) -> str:
    """``text`` with each run of blank lines (where declarations were left out) one blank line."""
    out: list[str] = []
    for line in text.split("\n"):
        if not line.strip() and out and not out[-1].strip():
            continue
        out.append(line)
    return "\n".join(out)


_PART_INCLUDE = re.compile(r'#include "((?:parts/)?[a-z_]+\.h)"')


def _pasted(directory, name: str, unused: Mapping[str, Sequence[tuple[int, int]]]) -> str:
    """The text of polypy's runtime header ``directory/name`` with its own quoted includes pasted.
    (These are polypy's files, written one include per line; user code never goes through here.)"""
    parts = name.split("/")
    here = directory
    for part in parts[:-1]:
        here = here.joinpath(part)
    path = here.joinpath(parts[-1])
    source = path.read_text(encoding="utf-8").splitlines()
    gone = _left_out(source, unused.get(os.path.realpath(str(path)), ()))
    lines = []
    for i, line in enumerate(source):
        if i in gone:
            continue
        if not line.strip() and lines and not lines[-1].strip():
            continue  # one blank line where declarations were left out
        m = _PART_INCLUDE.fullmatch(line.strip())
        lines.append(_pasted(here, m.group(1), unused).rstrip("\n") if m else line)
    return "\n".join(lines) + "\n"


def _left_out(lines: Sequence[str], spans: Sequence[tuple[int, int]]) -> set[int]:
    """The 0-based lines of ``spans`` and of the comment block right above each (polypy's own
    headers: a declaration's comment ends on the line before it)."""
    out: set[int] = set()
    for first, last in spans:
        out.update(range(first - 1, last))
        top = first - 2
        while top >= 0 and top not in out and _comment_line(lines[top]):
            top -= 1
        top += 1
        if top < first - 1 and lines[top].lstrip().startswith(("/*", "//")):
            out.update(range(top, first - 1))
    return out


def _comment_line(line: str) -> bool:
    text = line.strip()
    return text.startswith(("//", "/*", "*"))


def global_definition(b: n.Buffer) -> str:
    """``float taps[8] = {...};`` for a ``__constant__``/``__device__`` array of a kernel library."""
    if b.shape is None or not all(isinstance(d, n.Const) for d in b.shape):
        raise InternalError(f"module array {b.name!r} needs a constant shape", b.loc)
    dims = [int(d.value) for d in b.shape]  # type: ignore[attr-defined]
    text = f"{c_type(b.elem)} {b.name}{''.join(f'[{d}]' for d in dims)}"
    if b.init is None:
        return text + ";"
    values = [literal(n.Const(v, b.elem))[0] for v in b.init]
    values += ["0"] * (max(0, _product(dims) - len(values)))

    def nest(offset: int, level: int) -> str:
        if level == len(dims) - 1:
            return "{" + ", ".join(values[offset:offset + dims[level]]) + "}"
        step = _product(dims[level + 1:])
        return "{" + ", ".join(nest(offset + i * step, level + 1) for i in range(dims[level])) + "}"

    return f"{text} = {nest(0, 0)};"


def _product(dims: Sequence[int]) -> int:
    out = 1
    for d in dims:
        out *= d
    return out


@on_big_stack
def emit_kernels(kernels: Sequence[n.Kernel], globals_: Sequence[n.Buffer] = (), *, source: str = "",
                 cpp: bool = False, threads: int = 0, check_bounds: bool = False,
                 versions: Mapping[str, KernelVersions] | None = None,
                 barriers: Mapping[str, Sequence[object]] | None = None) -> str:
    """A C (or C++) file with a block function and a launcher per CPU-form kernel.

    ``barriers``: per kernel name, the barrier decisions of its lowering (``emit_kernel``).

    ``versions``: per kernel name, its versions (the pipeline's, ``polypy.passes.versions``;
    ``polypy.driver.library.emit_kernels`` makes them from block shapes): the launcher dispatches
    on their guards (``codegen.c.versions.emit_kernel``); a kernel without: itself alone.
    """
    options = Options(cpp=cpp, threads=threads, check_bounds=check_bounds)
    made = versions or {}
    notes = barriers or {}
    codes = [emit_kernel(k, options, versions=made.get(k.name), barriers=notes.get(k.name)).text for k in kernels]
    compiler = "c++" if cpp else "cc"
    return render_template(
        "c_kernels.j2", source=source or "<memory>", kernels=codes, language="C++" if cpp else "C",
        build_hint=f"{compiler} -O3 -march=native -fopenmp -shared -fPIC FILE -o libFILE.so -lm",
        fp_contract=fp_contract_off().rstrip(), prelude=prelude().rstrip(),
        runtime=runtime_header().rstrip() if check_bounds else "", cpp=cpp, globals=[global_definition(g) for g in globals_])


# --------------------------------------------------------------------------- whole programs


@dataclasses.dataclass
class _ProgramState:
    codes: dict[str, KernelCode]
    host: HostProgram
    included: set[str]
    defined: set[str] = dataclasses.field(default_factory=set)  # kernels whose code is already out
    share: bool = True  # copies proved unneeded are not made (frontend.host_copies)
    merge: bool = True  # host loops of launches in one parallel region (codegen.c.merged_loops)
    threads: int = 0  # --threads: the OpenMP threads of every region (0: the runtime's default)


@on_big_stack
def emit_program(host: HostProgram, kernels: Mapping[str, n.Kernel], *, threads: int = 0,
                 check_bounds: bool = False, emulate: bool = False,
                 barriers: Mapping[str, Sequence[object]] | None = None,
                 versions: Mapping[str, KernelVersions] | None = None, runtime: str | None = None,
                 static_shared: Mapping[str, int] | None = None) -> str:
    """The whole program as one C++ file (see the module docstring); ``kernels`` are CPU form.
    ``runtime``: the text that stands for polypy's runtime at the top (default: all of it,
    ``runtime_header()``; ``RUNTIME_INCLUDE`` to find what the program uses, ``runtime_slice``:
    the prelude is then ``PRELUDE_INCLUDE``, and ``with_runtime`` pastes both).
    ``barriers``: per kernel name, the barrier decisions of its lowering (``emit_kernel``).
    ``versions``: per kernel name, its versions (``polypy.passes.versions.program_versions``:
    per block shape of its launches, coarse blocks, arrays apart), printed by ``emit_kernel``; a
    kernel without is emitted as one generic version.

    ``emulate``: ``kernels`` are GPU form and every launch goes to polypy's reference emulator
    through ``polypy_emulate_hook`` (the file is then built as a shared library whose ``main`` the
    Python side calls; see ``polypy.driver.programs``).

    ``static_shared``: per kernel name, the bytes of its static ``__shared__`` arrays (GPU form):
    its launches may ask for 48 KiB less those of dynamic shared memory, or what
    ``cudaFuncSetAttribute`` sets for a kernel with a host stub (``codegen.c.shared_limits``).
    """
    options = Options(cpp=True, threads=threads, check_bounds=check_bounds, program=True)
    limits, variables = shared_limits(host, kernels, static_shared or {})
    if emulate:
        codes = {name: emulated_launcher(k, i, dataclasses.replace(options, max_dynamic=limits[name]))
                 for i, (name, k) in enumerate(kernels.items())}
    else:
        notes = barriers or {}
        team = in_merged_loops(host, kernels)
        codes = {name: emit_kernel(k, dataclasses.replace(options, in_team=name in team, max_dynamic=limits[name]),
                                   versions=(versions or {}).get(name), barriers=notes.get(name))
                 for name, k in kernels.items()}
    codes = {name: dataclasses.replace(code, text=variables[name] + code.text) if name in variables else code
             for name, code in codes.items()}
    if not emulate:
        codes = _with_child_prototypes(codes, kernels)
    # Copies are kept where the run checks device pointers (the emulator, --check-bounds).
    # Emulated launches call into Python, one at a time: their loops stay as written.
    state = _ProgramState(codes, host, {host.main}, share=not (emulate or check_bounds), merge=not emulate,
                          threads=threads)
    body = _rewrite(host.main, state)
    cccl = " ".join(program_flags(host))  # Thrust's headers (polypy.cccl)
    flags = f"-O3 -march=native -fopenmp {cccl + ' ' if cccl else ''}"
    build = f"c++ {flags}THIS_FILE -o program -lm" if host.has_main else \
        f"c++ {flags}-c THIS_FILE, linked with the program's other files (no main here)"
    head = (f"/* Generated by polypy from {os.path.basename(host.main)}: the CUDA program translated to C++ and "
            f"OpenMP.\n * Build: {build}\n */\n")
    bridge = EMULATE_BRIDGE if emulate else ""
    tail = EMULATE_ENTRY if emulate else ""
    support = PRELUDE_INCLUDE if runtime == RUNTIME_INCLUDE else prelude().rstrip()
    runtime = runtime_header() if runtime is None else runtime
    thrust = "".join(f"#include <{h}> /* what Thrust's CUDA system includes with each of its headers */\n"
                     for h in THRUST_CUDA_SYSTEM_INCLUDES) + "\n" if cccl else ""
    return (head + fp_contract_off() + "\n" + runtime.rstrip() + "\n\n" + support + "\n\n"
            + thrust + bridge + body + tail)


def in_merged_loops(host: HostProgram, kernels: Mapping[str, n.Kernel]) -> set[str]:
    """The kernels launched inside a host loop merged into one parallel region, and those they
    launch from device code: their launchers are the only ones a team's threads call (a merged
    loop calls nothing but this file's launchers, ``frontend.merge_loops``)."""
    out = set()
    for hf in host.files.values():
        spans = [(loop.start, loop.end) for loop in hf.loops if loop.merged]
        out |= {site.kernel for site in hf.launches if any(a <= site.start < b for a, b in spans)}
    todo = list(out)
    while todo:
        k = kernels.get(todo.pop())
        for child in ({x.kernel for x in walk(k) if isinstance(x, n.Launch)} if k is not None else ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _with_child_prototypes(codes: dict[str, KernelCode], kernels: Mapping[str, n.Kernel]) -> dict[str, KernelCode]:
    """Each kernel that launches kernels from device code (``n.Launch``) with its children's
    launchers declared before its code (a child may be defined later in the file, or be itself)."""
    out = dict(codes)
    for name, k in kernels.items():
        children = list(dict.fromkeys(x.kernel for x in walk(k) if isinstance(x, n.Launch)))
        if not children:
            continue
        missing = [c for c in children if c not in codes]
        if missing:
            raise InternalError(f"kernel {name!r} launches {', '.join(missing)}, which was not translated", k.loc)
        protos = "\n".join(codes[c].prototype for c in children)
        out[name] = dataclasses.replace(codes[name], text=f"/* launched from device code by {name} */\n{protos}\n\n"
                                                          + codes[name].text)
    return out


# An emulated program is compiled with -Dmain=polypy_main_impl; this gives its main a C name,
# whichever of the two standard signatures it has.
EMULATE_ENTRY = """

static int polypy_call_main(int (*f)(), int, char**) { return f(); }
static int polypy_call_main(int (*f)(int, char**), int argc, char** argv) { return f(argc, argv); }
extern "C" __attribute__((visibility("default"))) int polypy_program_main(int argc, char** argv) {
  return polypy_call_main(polypy_main_impl, argc, argv);
}
"""

# Launches of an emulated program call back into Python; a launch the emulator refuses (a race,
# an out-of-bounds access) ends the program with status 1 after the diagnostic is printed. A
# failed device assert (status 2) is the launch's cudaErrorAssert, sticky, as in a native run; a
# misaligned access (status 3) its cudaErrorMisalignedAddress.
EMULATE_BRIDGE = """#include <cstdio>
#include <cstdlib>
extern "C" {
typedef int (*polypy_emulate_hook_t)(int kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                     unsigned bz, size_t shmem, void** args, void** globals);
__attribute__((visibility("default"))) polypy_emulate_hook_t polypy_emulate_hook = 0;
__attribute__((visibility("default"))) int polypy_find_alloc(const void* p, void** base, size_t* size) {
  return polypy_rt_find_alloc(p, base, size);
}
/* A texture fetch, for the emulator: the program's texture objects live in its runtime. */
__attribute__((visibility("default"))) double polypy_tex_value_export(unsigned long long h, int op, int ix, float x,
                                                                    float y, float z, int layer, int c) {
  return polypy_tex_value(h, op, ix, x, y, z, layer, c);
}
}
/* The bytes of an array member of a struct passed by value (registered as an allocation for the
 * launch, so that the emulator views it in place); 0 for a pointer member. */
template <typename T, size_t N> static inline size_t polypy_member_array_bytes(T (&)[N]) { return sizeof(T) * N; }
template <typename T> static inline size_t polypy_member_array_bytes(T* const&) { return 0; }
static void polypy_emulate_launch(int kernel, dim3 grid, dim3 block, size_t shmem, void** args, void** globals) {
  fflush(stdout);
  int status = polypy_emulate_hook ? polypy_emulate_hook(kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                                         shmem, args, globals) : 1;
  if (status == 2) {
    polypy_rt_fail_sticky(cudaErrorAssert);
  } else if (status == 3) {
    polypy_rt_fail_sticky(cudaErrorMisalignedAddress);
  } else if (status != 0) {
    fflush(stdout);
    _Exit(1);
  }
}

"""


def _rewrite(path: str, state: _ProgramState, once: tuple[tuple[int, int], ...] = ()) -> str:
    """The text of ``path`` for the program, its user headers inlined; ``once``: the spans of its
    ``#pragma once`` directives, dropped (``IncludeSpan.once``)."""
    dropped = [(start, end, "/* #pragma once: this header is inlined once */") for start, end in once]
    hf = state.host.files.get(path)
    if hf is None:
        return _apply(read_source(path), dropped, path) if dropped else read_source(path)
    edits: list[tuple[int, int, str]] = list(dropped)
    for inc in hf.includes:
        if inc.kind == "cuda":
            edits.append((inc.start, inc.end, f"/* {hf.text[inc.start:inc.end]}: polypy's runtime, above */"))
        elif inc.kind == "user" and inc.target is not None:
            original = hf.text[inc.start:inc.end]
            if inc.target in state.included:
                edits.append((inc.start, inc.end, f"/* {original}: already included above */"))
            else:
                state.included.add(inc.target)
                inner = _rewrite(inc.target, state, inc.once).rstrip("\n")
                name = os.path.basename(inc.target)
                edits.append((inc.start, inc.end, f"/* ---- {original} ---- */\n{inner}\n/* ---- end of {name} ---- */"))
    prototypes = _prototype_sites(hf, state)
    # Instances placed after the types they take (frontend.instance_places), after the records
    # declared for the lambdas they take (frontend.closures): one text per place, in that order.
    places: dict[int, list[str]] = {}
    for at, record in hf.records:
        places.setdefault(at, []).append(record)
    for at, record, kernel in hf.forwards:  # named in a host function template before they are made
        places.setdefault(at, []).append(f"struct {record};\n{state.codes[kernel].prototype}")
    for at, kernel in hf.placed:
        places.setdefault(at, []).append(_instances_text(state, [kernel], _instance_stubs(state.host, kernel)))
    edits += [(at, at, "\n\n".join(texts) + "\n\n") for at, texts in places.items()]
    edits += list(hf.closures)  # where the program makes those lambdas: their records
    for span in hf.device_spans:
        if span.kind == "kernel":
            if span.kernels:
                missing = [k for k in span.kernels if k not in state.codes]
                if missing:
                    raise InternalError(f"no translated code for kernel(s) {', '.join(missing)}")
                here = [k for k in span.kernels if k not in span.later]
                text = _instances_text(state, here, span.instance_stubs)
                if span.stub is not None and span.stub.kernel is not None and needs_stub(state.host, span.stub.kernel):
                    text += "\n\n" + stub_definition(span.stub, state.codes[span.stub.kernel].launcher_name)
                if span.later:
                    text += (f"\n\n/* translated after the types they take: "
                             f"{', '.join(span.later)} */")
                if span.template_head is not None:  # a kernel template: its instances' stubs specialize it
                    text = (f"/* The kernel template, declared: its instances' host stubs are its specializations. */\n"
                            f"{span.template_head}\n\n{text}")
                state.defined.update(span.kernels)
            else:
                # A declaration (its `;` follows the span): the launchers it needs, declared, and
                # the kernel's host stub (defined where the kernel is, maybe in another file).
                protos = [state.codes[k].prototype for k in prototypes.get(span.start, [])]
                if span.stub is not None and (span.stub.kernel is None or needs_stub(state.host, span.stub.kernel)):
                    protos.append(stub_declaration(span.stub) + ";")
                text = "\n".join(protos).rstrip(";") or "/* kernel declaration: translated with its definition */"
            edits.append((span.start, span.end, text))
        elif span.kind == "device":
            edits.append((span.start, span.end, "/* device function: inlined where it is called */"))
        elif span.kind == "function-id":  # a device function named by a module variable: its id
            edits.append((span.start, span.end, span.kernels[0]))
        elif span.kind == "symbol-name":  # cudaMemcpyToSymbol("c", ...): the variable named
            edits.append((span.start, span.end, f"{span.kernels[0]} /* {hf.text[span.start:span.end]} */"))
    if state.share:  # copies not made (frontend.host_copies)
        for copy in hf.copies:
            if not copy.shared:
                continue
            if copy.direction == "to-device":  # the device array becomes the host buffer
                edits.append((copy.start, copy.end, f"polypy_rt_share_copy((void**)&{copy.device}, {copy.host}, "
                                                    f"(size_t)({copy.count}))"))
                edits += copy.renames  # frees of the buffer before the device array's cudaFree
                continue
            if copy.direction == "round-trip-out":  # nothing to copy where the device array became it
                edits.append((copy.start, copy.end, f"polypy_rt_same_copy({copy.host}, {copy.device}, "
                                                    f"(size_t)({copy.count}))"))
                continue
            # The host pointer takes the device array's memory.
            edits.append((copy.start, copy.end, f"polypy_rt_take_copy(&{copy.host}, {copy.device}, "
                                                f"(size_t)({copy.count}))"))
            edits += copy.renames
    for far in hf.indirect:  # as nvcc does: the configuration pushed, then the host stub called
        shmem = f"(size_t)({far.shmem})" if far.shmem is not None else "0"
        stream = f", {far.stream}" if far.stream is not None else ""
        edits.append((far.start, far.end, f"(polypy_rt_push_config(dim3({far.grid}), dim3({far.block}), {shmem}{stream}), "
                                          f"({far.callee})({', '.join(far.args)}))"))
    if state.merge:
        edits += merged_loop_edits(hf, threads=state.threads)
    sites: dict[tuple[int, int], list] = {}
    for launch in hf.launches:
        if launch.kernel not in state.codes:
            raise InternalError(f"launch of {launch.kernel!r}, which was not translated", launch.loc)
        sites.setdefault((launch.start, launch.end), []).append(launch)
    for (start, end), group in sites.items():
        calls = []  # (launcher expression, its arguments)
        for launch in group:
            shmem = f"(size_t)({launch.shmem})" if launch.shmem is not None else "0"
            args = "".join(", " + a for a in launch.args)
            launcher = state.codes[launch.kernel].launcher_name
            if launch.stream is not None:  # recorded instead of run while the stream captures
                launcher = f"polypy_rt_on_stream((cudaStream_t)({launch.stream}), {launcher})"
            calls.append((launcher, f"(dim3({launch.grid}), dim3({launch.block}), {shmem}{args})"))
        if len(group) == 1 and group[0].when is None:
            edits.append((start, end, calls[0][0] + calls[0][1]))
            continue
        # One launch that launches a different kernel per instance of its host function template,
        # or per expansion of the macro it is written in (AT_DISPATCH_FLOATING_TYPES's lambda, with
        # its own scalar_t each time): the template's parameters, or the types the launch's
        # template arguments name, pick the launcher at compile time. The branches are in a
        # generic lambda and call their launcher through its parameter, so that the discarded
        # ones are never instantiated, also outside any template (where a discarded branch
        # would be checked: its arguments have the other instance's types).
        chain = " else ".join(f"if constexpr ({launch.when}) polypy_pick({launcher}){args};"
                              for launch, (launcher, args) in zip(group, calls))
        # An instance whose launch polypy did not see would otherwise launch nothing: a compile error.
        chain += " else static_assert(sizeof(polypy_pick) == 0, \"polypy: no translated kernel for this instance\");"
        edits.append((start, end, f"({{ [&](auto polypy_pick) {{ {chain} }}([](auto polypy_f) {{ return polypy_f; }}); }})"))
    return _apply(hf.text, edits, path)


def stub_declaration(stub: HostStub) -> str:
    """``void k(float* x, int n)``: a kernel's host stub (``polypy.ir.host.HostStub``), declared."""
    storage = f"{stub.storage} " if stub.storage else ""
    return f"{storage}void {stub.name}({', '.join(f'{t} {p}' for t, p in stub.params)})"


def stub_definition(stub: HostStub, launcher: str) -> str:
    """A kernel's host stub, its launcher for ``cudaLaunchKernel``'s argument array, and its
    registration with the runtime (``polypy/runtime/parts/kernels.h``)."""
    assert stub.kernel is not None
    ir = stub.kernel
    names = [p for _, p in stub.params]
    names += [extra.format(*names) for extra in stub.extra_args]
    unpacked = [f"*(polypy_rt_type<{t}>*)polypy_args[{i}]" for i, (t, _) in enumerate(stub.params)]
    unpacked += [extra.format(*unpacked) for extra in stub.extra_args]
    signature = ", ".join(f"polypy_rt_type<{t}>" if not t.startswith("polypy_rt_type<") else t for t, _ in stub.params)
    return "\n".join([
        f"/* Host stub of kernel {stub.name}: its name in host code (a pointer to it, cudaLaunchKernel, a launch "
        "from another file).",
        " * Launches it with the configuration <<<...>>> pushed (polypy_rt_push_config). */",
        stub_declaration(stub),
        "{",
        f"{_INDENT}dim3 polypy_grid, polypy_block;",
        f"{_INDENT}size_t polypy_shmem;",
        f"{_INDENT}cudaStream_t polypy_stream;",
        f"{_INDENT}if (!polypy_rt_pop_config(&polypy_grid, &polypy_block, &polypy_shmem, &polypy_stream)) return;",
        # In the stream the launch was given: a capturing stream records it (parts/capture.h).
        f"{_INDENT}polypy_rt_on_stream(polypy_stream, {launcher})({', '.join(['polypy_grid', 'polypy_block', 'polypy_shmem'] + names)});",
        "}",
        f"static void {ir}_launch_args(dim3 grid, dim3 block, size_t shmem, void** polypy_args)",
        "{",
        f"{_INDENT}(void)polypy_args;",
        f"{_INDENT}{launcher}({', '.join(['grid', 'block', 'shmem'] + unpacked)});",
        "}",
        f"static polypy_rt_kernel_entry polypy_rt_entry_{ir}((const void*)static_cast<void (*)({signature})>(&{stub.name}), "
        f"&{ir}_launch_args, \"{stub.name}\", {stub.shared_bytes}, {stub.const_bytes}, &{max_dynamic_variable(ir)});",
        # Graph kernel nodes made by hand bind a kernelParams array to the stub (parts/graphs.h).
        f"static polypy_rt_kernel_binder polypy_rt_binder_{ir}((const void*)static_cast<void (*)({signature})>(&{stub.name}), "
        f"&polypy_rt_bind<{signature}>);",
    ])


_INDENT = "    "


def _prototype_sites(hf: HostFile, state: _ProgramState) -> dict[int, list[str]]:
    """Where launcher prototypes go: a kernel launched before its definition was declared before the
    launch, so its prototype goes to the last kernel declaration before its first launch."""
    declarations = sorted((s for s in hf.device_spans if s.kind == "kernel" and not s.kernels), key=lambda s: s.start)
    defined_at = {k: s.start for s in hf.device_spans if s.kind == "kernel" for k in s.kernels}
    first_launch: dict[str, int] = {}
    for launch in hf.launches:
        first_launch[launch.kernel] = min(first_launch.get(launch.kernel, launch.start), launch.start)
    sites: dict[int, list[str]] = {}
    forwarded = {kernel for _, _, kernel in hf.forwards}  # declared with their records (frontend.closures)
    for kernel, at in sorted(first_launch.items()):
        if kernel not in state.codes or kernel in state.defined or kernel in forwarded or \
                (kernel in defined_at and defined_at[kernel] < at):
            continue  # defined before its first launch (here or in an included file): no prototype needed
        before = [d for d in declarations if d.end <= at]
        if before:
            sites.setdefault(before[-1].start, []).append(kernel)
    return sites


def _instances_text(state: _ProgramState, kernels: list[str], stubs: tuple[HostStub, ...]) -> str:
    """The translated code of ``kernels`` (instances of one kernel template, or one kernel), each
    followed by the host stub that specializes the template for it, where it has one."""
    parts = [state.codes[k].text for k in kernels]
    parts += [stub_definition(stub, state.codes[stub.kernel].launcher_name) for stub in stubs if stub.kernel in kernels]
    return "\n\n".join(parts)


def _instance_stubs(host: HostProgram, kernel: str) -> tuple[HostStub, ...]:
    return tuple(stub for f in host.files.values() for span in f.device_spans if kernel in span.later
                 for stub in span.instance_stubs)


def _apply(text: str, edits: list[tuple[int, int, str]], path: str) -> str:
    edits.sort()
    out: list[str] = []
    pos = 0
    for start, end, replacement in edits:
        if start < pos:
            raise InternalError(f"overlapping rewrites in {path} at offset {start}")
        out.append(text[pos:start])
        out.append(replacement)
        pos = end
    out.append(text[pos:])
    return "".join(out)
