"""One CPU-form kernel -> its C block function and its OpenMP launcher.

The block function ``K_block`` is the kernel's CPU form rendered as C: the work of one thread
block, with ``blockIdx``/``blockDim``/``gridDim`` as parameters, the kernel's parameters, and a
pointer to each of its block-private buffers (shared memory, per-thread values). The launcher
``K_launch(grid, block, shmem_bytes, params...)`` (``c_launcher.j2``) allocates those buffers
once per OpenMP worker and spreads the blocks of the grid over the workers::

    #pragma omp parallel
    {   scratch = polypy_alloc_apart(..., first array read)   (once per worker, 512 bytes
                                                             modulo 1 KiB away from that array)
        #pragma omp for collapse(3) schedule(static) nowait
        for (bz...) for (by...) for (bx...) K_block({bx, by, bz}, ..., scratch)
        free(scratch) }

``nowait``: a worker done with its blocks frees its own scratch and waits once, at the end of the
parallel region (a second barrier after the loop costs every launch another sleep and wake-up
under passive waiting: Rodinia nw's 511 launches made 1,535 context switches, 1,024 without it).

Launcher signatures: kernel libraries (``--emit c``/``cpp`` on a file without host code) take
the kernel's IR parameters (struct parameters flattened into their members, as the Python
argument binder passes them); ``extern "C"`` in C++ with ``dim3 grid, dim3 block``, plain C with
``unsigned int grid_x, ..., block_z``. In a whole program the launcher takes the source
signature (``Kernel.source_params``: a struct by value stays a struct), so a launch site
``K<<<g, b, s>>>(args)`` becomes ``K_launch(dim3(g), dim3(b), s, args)``.
"""
from __future__ import annotations

import json

import dataclasses

from typing import Sequence

from polypy.analysis.grid_sync import has_grid_sync
from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.cexpr import ATOM
from polypy.ir.names import kernel_names
from polypy.ir.types import I64, PointerType
from polypy.ir.visitor import has_kind, walk_only

from codegen.scratch import scratch_dims

from codegen.c import launch_policy
from codegen.c.readable import barrier_notes, let_names, overflow_flags, thread_axis
from codegen.c.render import C_KEYWORDS, INDENT, MATH, Layout, Renderer, c_type, pointer_decl
from codegen.c.held_pointers import held_pointer_lines, held_pointer_params, launcher_symbol, table_row_check
from codegen.c.printing import aligned_argument_lines
from codegen.c.templates import render_template


@dataclasses.dataclass(frozen=True)
class Options:
    """How to emit: ``cpp`` (C++ rather than C), ``threads`` (OpenMP threads; 0 = runtime default),
    ``check_bounds`` (check every index), ``program`` (whole-program launcher: source signature,
    ``static``, configuration checked like a CUDA launch), ``in_team`` (a whole program's
    launcher may be called inside a merged host loop's parallel region, ``codegen.c.merged_loops``:
    it then shares the grid among the team; False where no merged loop launches the kernel)."""

    cpp: bool = False
    threads: int = 0
    check_bounds: bool = False
    program: bool = False
    in_team: bool = True
    # A whole program's launcher: the C expression of the most dynamic shared memory a launch may
    # ask for (``polypy_rt_shared_ok``; a constant, or the variable cudaFuncSetAttribute sets).
    max_dynamic: str = ""


@dataclasses.dataclass(frozen=True)
class KernelCode:
    name: str
    launcher_name: str
    prototype: str  # declaration of the launcher
    text: str  # block function and launcher


def _reserved() -> frozenset[str]:
    spellings = set()
    for f32, f64 in MATH.values():
        for s in (f32, f64):
            if s.isidentifier():
                spellings.add(s)
    # names the block functions and launchers themselves use
    spellings |= {"fmodf", "fmod", "sqrtf", "sqrt", "pow", "bx", "by", "bz", "shmem_bytes", "grid", "block",
                  "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"}
    return C_KEYWORDS | spellings


RESERVED = _reserved()


def c_names(kernel: n.Kernel) -> dict[str, str]:
    """IR names that cannot be C identifiers here, mapped to safe ones."""
    names = {p.name for p in kernel.params} | {b.name for b in kernel.buffers}
    for x in walk_only(kernel, n.Decl, n.For):
        if isinstance(x, n.Decl):
            names.add(x.name)
        elif isinstance(x, n.For):
            names.add(x.var)
    out: dict[str, str] = {}
    for name in sorted(names):
        if name in RESERVED or name.startswith("polypy_"):
            new = name + "_"
            while new in names or new in RESERVED:
                new += "_"
            out[name] = new
    return out


def _is_const_shape(shape: tuple[n.Expr, ...]) -> bool:
    return all(isinstance(d, n.Const) for d in shape)


def _dims_suffix(shape: tuple[n.Expr, ...] | tuple[int, ...]) -> str:
    return "".join(f"[{int(getattr(d, 'value', d))}]" for d in shape[1:])


class KernelEmitter:
    """The C code of one CPU-form kernel. ``variant`` (e.g. ``b256x1x1``, ``generic``) names a
    version of it among several (block-shape specializations): its block function and launcher
    get the suffix and the launcher is ``static``, called by the dispatching launcher.
    ``entry``: the version is the kernel's only one (``codegen.c.versions``): its launcher is the
    kernel's own, these lines first (the check of the version's guard)."""

    def __init__(self, kernel: n.Kernel, options: Options, *, variant: str = "",
                 barriers: Sequence[object] | None = None, entry: Sequence[str] | None = None):
        self.variant = variant
        self.entry = list(entry) if entry is not None else None
        if kernel.stage != "cpu":
            raise InternalError(f"the C backend needs CPU-form kernels; {kernel.name!r} is in {kernel.stage!r} form",
                                kernel.loc)
        if kernel.bounds_checks:  # the API's versions (LLVM); C checks every access of every version
            raise InternalError(f"the C backend checks bounds with --check-bounds, not per version "
                                f"({kernel.name!r} checks {', '.join(kernel.bounds_checks)})", kernel.loc)
        self.kernel = kernel
        self.options = options
        self.names = c_names(kernel)
        self.layouts: dict[str, Layout] = {}
        # Thread counters get new names per nest (codegen.c.readable); their IR names are free.
        counters = {x.var for x in walk_only(kernel, n.For) if x.kind == "threads"
                    and thread_axis(x.var) is not None}
        taken = (kernel_names(kernel) - counters) | set(self.names.values()) | set(RESERVED)
        self.flags = overflow_flags(kernel, taken)
        self.names.update(let_names(kernel, taken))
        self.renderer = Renderer(kernel, self.layouts, check_bounds=options.check_bounds,
                                 names=self.names, flags=self.flags, barriers=barrier_notes(barriers),
                                 taken=taken, program=options.program)
        self._layouts()

    def cname(self, name: str) -> str:
        return self.names.get(name, name)

    # ------------------------------------------------------------------ buffers
    def _layouts(self) -> None:
        k = self.kernel
        for p in k.params:
            if isinstance(p.ptype, PointerType):
                self.layouts[p.name] = Layout(self.cname(p.name), "pointer", p.ptype.elem)
        for b in k.buffers:
            name = self.cname(b.name)
            if b.shape is None:
                self.layouts[b.name] = Layout(name, "flat", b.elem, (_dynamic_count(b),))
                continue
            extents = tuple(self.renderer.expr(d, ATOM) for d in b.shape)  # Layout wants atoms
            if b.space in ("constant", "device"):
                one = len(b.shape) == 1 and isinstance(b.shape[0], n.Const) and b.shape[0].value == 1
                if self.options.program and (b.symbol is not None or one):
                    # A whole program keeps the host's declaration (``float x;``, ``float3 f[2]``, a
                    # record array): the IR's flat scalar slots are addressed through its address.
                    self.layouts[b.name] = Layout(b.symbol or b.name, "alias", b.elem, extents)
                else:
                    self.layouts[b.name] = Layout(b.name, "array", b.elem, extents)
            elif _is_const_shape(b.shape):
                self.layouts[b.name] = Layout(name, "array", b.elem, extents)
            else:
                self.layouts[b.name] = Layout(name, "flat", b.elem, extents)

    def scratch_buffers(self) -> list[n.Buffer]:
        """The block-private buffers in the worker's scratch memory (the rest live in the block
        function's frame: ``Buffer.frame``)."""
        return [b for b in self.kernel.buffers if b.space in ("shared", "local") and not b.frame]

    def frame_arrays(self) -> list[str]:
        """The declarations of the block function's own arrays (``Buffer.frame``), uninitialized."""
        out = []
        for b in self.kernel.buffers:
            if b.frame:
                dims = "".join(f"[{int(d.value)}]" for d in b.shape or ())  # type: ignore[attr-defined]
                out.append(f"{c_type(b.elem)} {self.cname(b.name)}{dims};")
        return out

    def scratch_param(self, b: n.Buffer) -> str:
        """The block function's parameter for a block-private buffer."""
        t = c_type(b.elem)
        name = self.cname(b.name)
        dims = scratch_dims(b)
        if dims is not None and len(dims) > 1:
            return f"{t} (*POLYPY_RESTRICT {name}){_dims_suffix(dims)}"
        return f"{t}* POLYPY_RESTRICT {name}"

    # ------------------------------------------------------------------ block function
    @property
    def block_name(self) -> str:
        # The generic version keeps the plain name: it is the kernel as written.
        return f"{self.kernel.name}_block" + (f"_{self.variant}" if self.variant not in ("", "generic") else "")

    @property
    def launcher_name(self) -> str:
        return f"{self.kernel.name}_launch" + (f"_{self.variant}" if self.variant and self.entry is None else "")

    def block_params(self) -> list[str]:
        out = ["polypy_uint3 blockIdx", "polypy_uint3 blockDim", "polypy_uint3 gridDim", "size_t shmem_bytes"]
        out += [pointer_decl(p, self.cname(p.name)) for p in self.kernel.params]
        out += [self.scratch_param(b) for b in self.scratch_buffers()]
        if self.options.check_bounds:
            for p in self.pointer_params():
                out += [f"long long polypy_lo_{self.cname(p.name)}", f"long long polypy_hi_{self.cname(p.name)}"]
        return out

    def pointer_params(self) -> list[n.Param]:
        return [p for p in self.kernel.params if isinstance(p.ptype, PointerType)]

    def block_function(self) -> str:
        k = self.kernel
        lines: list[str] = []
        params = (",\n" + INDENT * 2).join(self.block_params())
        restrict = any(p.ptype.restrict for p in self.pointer_params())
        lines.append(f"{'POLYPY_RESTRICT_BLOCK ' if restrict else ''}static void {self.block_name}(")
        lines.append(INDENT * 2 + params + ")")
        lines.append("{")
        lines.append(f"{INDENT}POLYPY_ASSUME(POLYPY_BLOCK_LIMITS(blockDim));")
        lines += [INDENT + decl for decl in self.frame_arrays()]
        if self.flags:
            lines.append(f"{INDENT}// The fast thread loops below compute indices in 64 bits, as if 32-bit arithmetic "
                         f"did not wrap: exact")
            lines.append(f"{INDENT}// only where this block's indices fit in 32 bits (else the loops as written run).")
        for flag in self.flags:
            lines.append(f"{INDENT}const bool {flag.name} = {self.renderer.unnamed(flag.test)};  "
                         f"// indices fit in {flag.type_name}")
        self.renderer.block(k.body, 1, lines)
        self.renderer.note_barriers(None, 1, lines)
        lines.append("}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ launcher
    def signature(self) -> tuple[str, list[str]]:
        """(the launcher's declaration, the C expression of each IR parameter inside it)."""
        decl, values, _, _ = self._signature()
        return decl, values

    def addressable(self) -> list[str]:
        """An lvalue holding each IR parameter inside the launcher (``p.n``, ``a``), in order."""
        return self._signature()[3]

    def forwarded(self) -> list[str]:
        """The launcher's parameter names, in order (to pass them on to another launcher)."""
        return self._signature()[2]

    def _signature(self) -> tuple[str, list[str], list[str], list[str]]:
        k = self.kernel
        opts = self.options
        if opts.cpp:
            head = ["dim3 grid", "dim3 block", "size_t shmem_bytes"]
            names = ["grid", "block", "shmem_bytes"]
        else:
            head = [f"unsigned int {w}_{d}" for w in ("grid", "block") for d in "xyz"] + ["size_t shmem_bytes"]
            names = [f"{w}_{d}" for w in ("grid", "block") for d in "xyz"] + ["shmem_bytes"]
        values: dict[str, str] = {}
        lvalues: dict[str, str] = {}  # an lvalue holding each IR parameter (the emulated launcher takes addresses)
        params: list[str] = []
        source_types = {sp.name: sp.ctype for sp in k.source_params if sp.members == (("", sp.name),)}
        held = held_pointer_params(k)
        for name in held:  # launcher locals (table_locals)
            values[name] = lvalues[name] = self.cname(name)
        if held and not opts.program:
            slots = k.held_pointers[0]
            raise UserError(f"kernel '{k.name}' {slots.what()}: supported in whole programs only (a file with "
                            "host code)", slots.loc)
        if opts.program:
            # The C signature: source parameters in source order; a struct whole, by value.
            structs = {sp.name: sp for sp in k.source_params if sp.members != (("", sp.name),)}
            member_of = {ir: sp for sp in structs.values() for _, ir in sp.members}
            covered = {ir for sp in k.source_params for _, ir in sp.members} == {p.name for p in k.params} - held
            order = [sp.name for sp in k.source_params] if covered else \
                list(dict.fromkeys(member_of[p.name].name if p.name in member_of else p.name for p in k.params
                                   if p.name not in held))
            for name in order:
                sp = structs.get(name)
                if sp is None:
                    p = k.param(name)
                    if p is None:
                        raise InternalError(f"source parameter {name!r} of {k.name!r} has no IR parameter")
                    cname = self.cname(p.name)
                    source = source_types.get(p.name)
                    if source is not None and isinstance(p.ptype, PointerType) and \
                            source not in _plain_pointer_spellings(p.ptype):
                        # `float4* a`, `const Particle* q`: the host passes that type; the block
                        # function sees the buffer of scalars the frontend flattened it into.
                        params.append(f"{source} {cname}")
                        values[p.name] = f"({_pointer_type(p.ptype)}){cname}"
                    elif source is not None and source.startswith(("enum ", "decltype(")) and \
                            not isinstance(p.ptype, PointerType):
                        # A launch passes the enumeration (an `enum class` is no integer to C++), or
                        # a device function pointer, whose value is the function's id (frontend.function_ids).
                        params.append(f"{source} {cname}")
                        values[p.name] = f"({c_type(p.ptype)}){cname}"
                    else:
                        params.append(pointer_decl(p, cname))
                        values[p.name] = cname
                    lvalues[p.name] = cname
                    names.append(cname)
                else:
                    params.append(f"{sp.ctype} {sp.name}")
                    names.append(sp.name)
                    for path, ir_name in sp.members:
                        if path in (n.TABLE_POOL, n.TABLE_BASE, n.NONNULL):  # launcher locals (table_locals)
                            values[ir_name] = lvalues[ir_name] = self.cname(ir_name)
                            continue
                        if ".__base" in path:
                            # A member of a base subobject (frontend.bases) has no C++ spelling the
                            # launcher could use (a private base's members are not accessible there).
                            where = k.param(ir_name)
                            raise UserError(f"kernel parameter '{sp.name}' of derived class '{sp.ctype}' passed by "
                                            "value is not supported in whole programs (pass a pointer to it)",
                                            where.loc if where is not None else k.loc)
                        lvalues[ir_name] = sp.name + path
                        ir_param = k.param(ir_name)
                        if ir_param is not None and isinstance(ir_param.ptype, PointerType):
                            # A pointer member may point to vectors or records too.
                            values[ir_name] = f"({_pointer_type(ir_param.ptype)})({sp.name}{path})"
                        elif ir_param is not None and ir_param.ptype == I64:  # maybe a function pointer member
                            values[ir_name] = f"(long long)({sp.name}{path})"
                        else:
                            values[ir_name] = sp.name + path
        else:
            for p in k.params:
                params.append(pointer_decl(p, self.cname(p.name)))
                values[p.name] = lvalues[p.name] = self.cname(p.name)
                names.append(self.cname(p.name))
        if opts.program:
            linkage = "static inline void"
        else:
            linkage = "static void" if self.variant else "POLYPY_EXPORT void"
        decl = f"{linkage} {self.launcher_name}({', '.join(head + params)})"
        return decl, [values[p.name] for p in k.params], names, [lvalues[p.name] for p in k.params]

    def table_locals(self) -> list[str]:
        """Launcher locals of the ``T**`` parameters of a whole program: the pool (the allocation the
        table's first pointer points into; that pointer itself if it is no allocation) and its address."""
        out: list[str] = []
        if not self.options.program:
            return out
        whole = {name: sp.name for sp in self.kernel.source_params for path, name in sp.members if path == ""}
        out += aligned_argument_lines(self.kernel, lambda name: whole.get(name) or self.cname(name))
        for sp in self.kernel.source_params:
            paths = dict(sp.members)
            if n.NONNULL in paths:  # `p != NULL` in the kernel
                out.append(f"int {self.cname(paths[n.NONNULL])} = {sp.name} != 0;")
            if n.TABLE_POOL not in paths or n.TABLE_BASE not in paths:
                continue
            pool, base = paths[n.TABLE_POOL], paths[n.TABLE_BASE]
            p = self.kernel.param(pool)
            assert p is not None and isinstance(p.ptype, PointerType)
            t = _pointer_type(p.ptype)
            first = f"({sp.name} ? *(void* const*){sp.name} : (void*)0)"
            out.append(f"{t} {self.cname(pool)} = ({t})[&]() {{ void* polypy_p = {first}; size_t polypy_n = 0; "
                       f"polypy_rt_find_alloc(polypy_p, &polypy_p, &polypy_n); return polypy_p; }}();")
            out.append(f"unsigned long long {self.cname(base)} = (unsigned long long){self.cname(pool)};")
            out.append(table_row_check(self.kernel, sp.name, paths[""], p.ptype.elem.itemsize))
        out += held_pointer_lines(self.kernel, self.cname)
        return out

    def launcher(self) -> str:
        decl, values = self.signature()
        opts = self.options
        if opts.cpp:
            grid = ("grid.x", "grid.y", "grid.z")
            block = ("block.x", "block.y", "block.z")
        else:
            grid = ("grid_x", "grid_y", "grid_z")
            block = ("block_x", "block_y", "block_z")
        prologue: list[str] = list(self.entry or ())
        if opts.program:
            prologue.append(f"if (!polypy_rt_launch_ok({', '.join(grid + block)}, shmem_bytes){shared_check(opts)}) return;")
            if self.kernel.host_polls:  # a loop only the host can end: not on the calling thread
                prologue.append(f"polypy_rt_host_released({json.dumps(str(self.kernel.loc))}, \"{self.kernel.name}\");")
            prologue += self.table_locals()
            if has_kind(self.kernel, n.Launch):
                # Launches from device code: kept while the blocks run, run when they are done
                # (when this object goes out of scope), before the launch returns (parts/dynamic.h).
                prologue.append("polypy_rt_cdp_grid polypy_cdp_grid;")
        else:
            prologue.append("if (!polypy_launch_ok(gridDim, blockDim)) return;")
            for x in walk_only(self.kernel, n.Launch):
                if isinstance(x, n.Launch):
                    raise UserError(f"kernel launches from device code (dynamic parallelism: '{x.kernel}' launched "
                                    "here) are supported in whole programs only (a file with host code), not in "
                                    "kernel libraries for the Python API", x.loc)
        arguments = list(values)
        # Sums per worker (``worker_sums``): the blocks add into the worker's own slots, and the
        # worker adds its sums to the array once, after its share of the grid.
        sums = [] if opts.check_bounds or has_grid_sync(self.kernel) else launch_policy.worker_sums(self.kernel)
        for index, slot, elem in sums:
            arguments[index] = f"polypy_sum_{index}"
        scratch = []
        # Scratch memory goes 512 bytes (mod 1 KiB) away from the first array the kernel reads
        # (polypy_alloc_apart: 4K aliasing between a tile copy's loads and stores).
        reads = {x.buffer for x in walk_only(self.kernel, n.Load)}
        apart = next((values[i] for i, p in enumerate(self.kernel.params)
                      if isinstance(p.ptype, PointerType) and p.name in reads), None)
        alloc = (lambda size: f"polypy_alloc_apart({size}, {apart})") if apart is not None else \
            (lambda size: f"polypy_alloc({size})")
        dynamic = False
        padding = 0  # bytes past the launch's: the parts of a split extern array round N up to q parts
        for b in self.scratch_buffers():
            t = c_type(b.elem)
            name = self.cname(b.name)
            if b.shape is None:
                dynamic = True
                start = ""
                if b.part is not None:  # part p of q: at p * ceil(N / q) (Buffer.part)
                    p, q = b.part
                    start = f" + {p} * ((shmem_bytes / sizeof({t}) + {q - 1}) / {q})" if p else ""
                    padding = max(padding, q * b.elem.itemsize)
                arguments.append(f"({t}*)polypy_dynamic_shared{start}")
                continue
            dims = scratch_dims(b)
            count = " * ".join(f"(size_t)({self.renderer.expr(d)})" for d in b.shape) if dims is None else \
                " * ".join(f"(size_t)({d})" for d in dims)
            if dims is not None and len(dims) > 1:
                pointer, cast = f"{t} (*{name}){_dims_suffix(dims)}", f"{t} (*){_dims_suffix(dims)}"
            else:
                pointer, cast = f"{t}* {name}", f"{t}*"
            scratch.append({"pointer": pointer, "cast": cast, "alloc": alloc(f"sizeof({t}) * {count}"), "name": name})
            arguments.append(name)
        if dynamic:
            scratch.append({"pointer": "unsigned char* polypy_dynamic_shared", "cast": "unsigned char*",
                            "alloc": alloc(f"shmem_bytes + {padding}" if padding else "shmem_bytes"),
                            "name": "polypy_dynamic_shared"})
        if opts.check_bounds:
            for p in self.pointer_params():
                name = self.cname(p.name)
                value = values[_param_index(self.kernel, p.name)]
                elem = c_type(p.ptype.elem)  # type: ignore[union-attr]
                prologue += [
                    f"long long polypy_lo_{name} = 0, polypy_hi_{name} = 0;",
                    f"{{ void* base; size_t size; if (polypy_rt_find_alloc({value}, &base, &size)) {{ "
                    f"polypy_lo_{name} = -(long long)(((const char*){value} - (const char*)base) / sizeof({elem})); "
                    f"polypy_hi_{name} = (long long)(((const char*)base + size - (const char*){value}) / sizeof({elem})); }} }}",
                ]
                arguments += [f"polypy_lo_{name}", f"polypy_hi_{name}"]
        num_threads = f" num_threads({opts.threads})" if opts.threads > 0 else ""
        alone, alone_why = launch_policy.runs_alone(self.kernel, opts.threads)
        # A coarsened kernel runs for blockIdx = multiples of its factors (Kernel.coarsen).
        factors = self.kernel.coarsen
        steps = [f"++b{axis}" if f == 1 else f"b{axis} += {f}u" for axis, f in zip("xyz", factors)]
        note = ""
        if factors != (1, 1, 1):
            note = (f"\n * Coarse blocks: one call of the block function does the work of the blocks from blockIdx "
                    f"to blockIdx + ({', '.join(map(str, factors))}) - 1 in the grid.")
        worker_sums = [{"array": f"polypy_sum_{index}", "type": c_type(elem), "slots": slot + 1, "slot": slot,
                        "zero": "-0.0f" if elem.name == "f32" else "-0.0" if elem.name == "f64" else "0",
                        "target": values[index], "add": f"polypy_atomic_add_{elem.name}"}
                       for index, slot, elem in sums]
        if sums:
            note += ("\n * Sums per worker (" + ", ".join(self.kernel.params[i].name for i, _, _ in sums)
                     + ": atomic adds to one element only): each worker adds into its own copy and adds"
                     + "\n * that to the array once (CUDA orders no atomics).")
        if has_grid_sync(self.kernel):
            if factors != (1, 1, 1):
                raise InternalError("a kernel with grid.sync() given coarse blocks", self.kernel.loc)
            return render_template("c_cooperative.j2", kernel=self.kernel.name, signature=decl, grid=grid,
                                   block=block, prologue=prologue, scratch=scratch, block_function=self.block_name,
                                   arguments=arguments)
        # A whole program's launcher without scratch memory, sums per worker or a merged loop's
        # team: the prelude's polypy_run_blocks does the rest (c_launcher.j2, ``runner``).
        runner = opts.program and opts.cpp and not scratch and not worker_sums and not opts.in_team
        return render_template("c_launcher.j2", kernel=self.kernel.name, signature=decl, grid=grid, block=block,
                               runner=runner, cost=launch_policy.small_grid_cost(self.kernel), threads=opts.threads,
                               prologue=prologue, num_threads=num_threads, scratch=scratch,
                               block_function=self.block_name, arguments=arguments, steps=steps, note=note,
                               worker_sums=worker_sums, team=opts.program, in_team=opts.in_team, alone=alone, alone_why=alone_why,
                               factors=list(factors))

    def emit(self) -> KernelCode:
        k = self.kernel
        where = f" ({k.loc.file}:{k.loc.line})" if k.loc is not None else ""
        version = f", version {self.variant}" if self.variant else ""
        header = f"/* ---- kernel {k.name}{where}{version}: {_thread_nests(k.body)} thread loop nest(s) per block ---- */"
        text = "\n".join([header, self.block_function(), "", self.launcher().rstrip()])
        decl, _ = self.signature()
        return KernelCode(k.name, self.launcher_name, decl + ";", text)


def _pointer_type(t: PointerType) -> str:
    """``const float*``: the C type of a pointer parameter of the block function, for a cast."""
    return f"{'const ' if t.const else ''}{c_type(t.elem)}*"


def _plain_pointer_spellings(t: PointerType) -> frozenset[str]:
    """How clang spells a source pointer type that converts to ``t`` by itself (``const float *``);
    any other spelling (``float4 *``, ``const Particle *``, a typedef) is cast."""
    elem = c_type(t.elem)
    bases = {f"{elem} *", f"const {elem} *"} if t.const else {f"{elem} *"}
    return frozenset(b + r for b in bases for r in ("", "__restrict__", "__restrict"))


def _thread_nests(stmts: tuple[n.Stmt, ...]) -> int:
    """Outermost thread loops in ``stmts``."""
    return sum(1 if isinstance(s, n.For) and s.kind == "threads" else
               sum(_thread_nests(getattr(s, block)) for block in s.BLOCKS) for s in stmts)


def _param_index(kernel: n.Kernel, name: str) -> int:
    for i, p in enumerate(kernel.params):
        if p.name == name:
            return i
    raise KeyError(name)


def shared_check(options: Options) -> str:
    """The launcher's test of its dynamic shared memory against its kernel's limit (after the
    shape's, in the same condition), where ``options`` give one."""
    return f" || !polypy_rt_shared_ok(shmem_bytes, {options.max_dynamic})" if options.max_dynamic else ""


def emulated_launcher(kernel: n.Kernel, index: int, options: Options) -> KernelCode:
    """A whole-program launcher that hands the launch to polypy's reference emulator.

    The arguments go out in the kernel's IR parameter order (struct members one by one), with
    the addresses of the ``__constant__``/``__device__`` arrays the kernel uses, through the hook
    ``polypy_emulate_hook`` that the Python side sets (``polypy run --emulate``).
    """
    signature_only = dataclasses.replace(kernel, stage="cpu", body=(),
                                         buffers=tuple(b for b in kernel.buffers if b.space in ("constant", "device")))
    emitter = KernelEmitter(signature_only, options)
    decl, _ = emitter.signature()
    # A pointer member of a struct passed by value goes out through a local pointer, and an array
    # member (`float coef[4]`, indexed at run time) is registered as an allocation for the launch:
    # the emulator views the launcher's copy of the struct in place, as it views cudaMalloc memory.
    members = [(i, v) for i, (p, v) in enumerate(zip(kernel.params, emitter.addressable()))
               if isinstance(p.ptype, PointerType) and "." in v]
    slots = [f"(void*)&polypy_member_{i}" if any(i == j for j, _ in members) else f"(void*)&{v}"
             for i, v in enumerate(emitter.addressable())]
    args = ", ".join(slots) or "0"
    declared = [line for i, v in members for line in (
        f"void* polypy_member_{i} = (void*)({v});",
        f"size_t polypy_member_bytes_{i} = polypy_member_array_bytes({v});")]
    before = [f"if (polypy_member_bytes_{i}) polypy_rt_register(polypy_member_{i}, polypy_member_bytes_{i});"
              for i, _ in members]
    after = [f"if (polypy_member_bytes_{i}) polypy_rt_unregister(polypy_member_{i}, 0);" for i, _ in members]
    globals_ = ", ".join(f"(void*)&{launcher_symbol(kernel, b.symbol or b.name)}" for b in signature_only.buffers) or "0"
    text = "\n".join([
        f"/* ---- kernel {kernel.name}: run by polypy's reference emulator ---- */",
        decl,
        "{",
        *(INDENT + line for line in emitter.table_locals()),
        *(INDENT + line for line in declared),
        f"{INDENT}void* polypy_args[] = {{{args}}};",
        f"{INDENT}void* polypy_globals[] = {{{globals_}}};",
        # an invalid configuration runs nothing and is the launch's error, as in the compiled launcher
        f"{INDENT}if (!polypy_rt_launch_ok(grid.x, grid.y, grid.z, block.x, block.y, block.z, shmem_bytes)"
        f"{shared_check(options)}) return;",
        # a loop only the host can end: not on the calling thread, as in the compiled launcher
        *([f"{INDENT}polypy_rt_host_released({json.dumps(str(kernel.loc))}, \"{kernel.name}\");"]
          if kernel.host_polls else []),
        *(INDENT + line for line in before),
        f"{INDENT}polypy_emulate_launch({index}, grid, block, shmem_bytes, polypy_args, polypy_globals);",
        *(INDENT + line for line in after),
        "}",
    ])
    return KernelCode(kernel.name, emitter.launcher_name, decl + ";", text)


def _dynamic_count(b: n.Buffer) -> str:
    """The element count of an ``extern __shared__`` buffer, in C: the launch's ``N``, or
    ``ceil((N - p) / q)`` for part ``p`` of ``q`` (``Buffer.part``)."""
    count = f"(shmem_bytes / sizeof({c_type(b.elem)}))"
    if b.part is None:
        return count
    p, q = b.part
    return f"(({count} + {q - 1 - p}) / {q})"
