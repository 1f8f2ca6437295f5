"""Texture fetches and surface reads and writes in device code (docs/textures.md).

* ``tex1D/2D/3D/1DLayered/2DLayered/Cubemap/CubemapLayered<T>(obj, ...)`` and ``tex1Dfetch<T>(obj,
  i)`` of a texture object, and ``tex1D/2D/3D(ref, ...)`` of a texture reference bound to an array:
  one ``texture`` call per component of ``T`` (``polypy.ir.textures``), a pure read. A reference is
  a hidden ``unsigned long long`` parameter, the texture object the launch makes of the reference's
  state (``polypy_texref_object``).
* ``surf*read<T>`` / ``surf*write`` of a surface object that is a kernel parameter: loads and stores
  of the surface's memory, which the kernel receives as hidden parameters per element type (a
  pointer to the texels and the surface's row size, rows and slices), so that the analyses see
  every surface write as the store it is. The boundary mode is a constant: trap (a failed check
  stops the thread and fails the launch, as an ``assert``), zero (reads 0, writes nothing) or
  clamp.
"""
from __future__ import annotations

import pathlib
import string

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.textures import TEXTURE, TEXTURE_OPS, TEXTURE_RESULTS
from polypy.ir.visitor import walk
from polypy.ir.types import BOOL, F32, I32, I64, U64, PointerType, ScalarType

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.clang_setup import PRELUDE_DIR, cursor_loc, preorder
from frontend.lower.context import CK
from frontend.lower.helpers import DEFAULT
from frontend.values import Aggregate, Value

# Coordinates after the object of each texture function: (float coordinates, integer layer).
_TEX_COORDS = {"tex1Dfetch": (0, False), "tex1D": (1, False), "tex2D": (2, False), "tex3D": (3, False),
               "tex1DLayered": (1, True), "tex2DLayered": (2, True), "texCubemap": (3, False),
               "texCubemapLayered": (3, True)}
# Surface functions: (dimensions, layered); the integer coordinates are x (bytes), then y, z / layer.
_SURFACES = {"surf1D": (1, False), "surf2D": (2, False), "surf3D": (3, False), "surf1DLayered": (1, True),
             "surf2DLayered": (2, True)}
_MODES = {0: "zero", 1: "clamp", 2: "trap"}


def is_texture_call(base: str, fn: ci.Cursor) -> bool:
    """A texture or surface function polypy's device header declares (a program's own function of
    the same name is the program's)."""
    named = base in _TEX_COORDS or (base.endswith(("read", "write")) and base[:-5 if base.endswith("write") else -4]
                                    in _SURFACES)
    where = fn.location.file
    return named and where is not None and pathlib.Path(where.name).resolve().parent == PRELUDE_DIR.resolve()


def _is_reference(t: ci.Type) -> bool:
    return t.get_canonical().spelling.split("<")[0].split("::")[-1] == "texture"


def texture_call(b, base: str, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor) -> Value | None:
    if base in _TEX_COORDS:
        return _texture(b, base, fn, args, c)
    write = base.endswith("write")
    return _surface(b, base[:-5] if write else base[:-4], write, fn, args, c)


def _texture(b, base: str, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor) -> Value | None:
    out = None
    if args and tm.is_pointer(args[0].type) and not _is_reference(args[0].type):
        out, args = args[0], args[1:]  # tex2D(&v, obj, x, y): the value stored through the pointer
    if _is_reference(args[0].type):
        if base == "tex1Dfetch":
            return b.texture_fetch(args, c)
        handle = _reference_object(b, base, args[0])
        rtype = c.type
    else:
        handle = convert(b.scalar(args[0]), U64)
        rtype = tm.pointee(out.type) if out is not None else c.type
    count, layered = _TEX_COORDS[base]
    loc = b.loc(c)
    zero_f, zero_i = n.Const(0.0, F32, loc=loc), n.Const(0, I32, loc=loc)
    ix = convert(b.scalar(args[1]), I32) if base == "tex1Dfetch" else zero_i
    xyz = [convert(b.scalar(a), F32) for a in args[1:1 + count]] if base != "tex1Dfetch" else []
    xyz += [zero_f] * (3 - len(xyz))
    layer = convert(b.scalar(args[1 + count]), I32) if layered else zero_i
    layout = tm.elem_layout(rtype, loc)
    if layout.scalar not in TEXTURE_RESULTS or layout.stride not in (1, 2, 4):
        raise b.error(f"texture fetches of type '{rtype.spelling}' are not supported (1, 2 or 4 components of "
                      f"float or of 8-, 16- or 32-bit integers)", c)
    op = n.Const(TEXTURE_OPS[base], I32, loc=loc)
    comps = {path: n.Call(TEXTURE, (handle, op, ix, *xyz, layer, n.Const(k, I32, loc=loc)), layout.scalar, loc=loc)
             for path, k in layout.slots}
    value: Value = comps[""] if "" in comps else Aggregate(dict(comps), rtype.spelling)
    if out is None:
        return value
    b.assign(b.deref(b.expr(out), c), value, c)
    return None


def _reference_object(b, base: str, arg: ci.Cursor) -> n.Expr:
    """The hidden parameter holding the texture object a launch makes of the reference ``arg``."""
    refs = [r for r in preorder(arg) if r.kind == CK.DECL_REF_EXPR]
    decl = refs[0].referenced if len(refs) == 1 else None
    if decl is None or decl.kind != CK.VAR_DECL:
        raise b.error("texture references are only supported as file-scope variables", arg)
    t = decl.type.get_canonical()
    spelled = t.spelling[t.spelling.index("<") + 1:t.spelling.rindex(">")]
    if spelled.count(",") >= 2 and spelled.rsplit(",", 1)[1].strip() not in ("cudaReadModeElementType", "0"):
        raise b.error(f"{base} of a texture reference with cudaReadModeNormalizedFloat is not supported (use a "
                      f"texture object)", arg)
    name = hidden_param(b, ("object", decl.spelling), decl.spelling, U64, "unsigned long long",
                        f"polypy_texref_object(&{decl.spelling})", b.loc(decl))
    return n.Var(name, U64, loc=b.loc(arg))


def hidden_param(b, key: tuple, base: str, ptype, ctype: str, launch: str, where) -> str:
    """The name of the kernel's hidden parameter ``key`` (made on first use): its launch passes
    ``launch``, where ``{k}`` is the text of the launch's argument ``k``."""
    hidden = b.ctx.textures.setdefault(b.kernel_name, [])
    for pname, k, _ in hidden:
        if k == key:
            return pname
    pname = b.names.fresh(base)
    b.params.append(n.Param(pname, ptype, loc=where))
    b.source_params.append(n.SourceParam(pname, ctype, (("", pname),)))
    hidden.append((pname, key, launch))
    return pname


def hidden_arguments(hidden, arg_cursors: list[ci.Cursor], arg_texts: list[str]) -> list[str]:
    """What a launch passes for the kernel's hidden parameters (``hidden_param``), from the texts
    of its arguments. An argument a hidden one reads again must be free of effects (a variable, a
    member or element of one): a call or an operator there would run once per reading."""
    out = []
    for _, _, launch in hidden:
        for _, field, _, _ in string.Formatter().parse(launch):
            if field is None:
                continue
            arg = arg_cursors[int(field)]
            if any(c.kind in _EFFECTS for c in preorder(arg)):
                raise UserError("a surface object argument that is not a variable (or a member or element of one) "
                                "is not supported: the launch reads it again for each hidden argument of the "
                                "kernel's surface accesses", cursor_loc(arg))
        out.append(launch.format(*arg_texts))
    return out


_EFFECTS = (CK.CALL_EXPR, CK.UNARY_OPERATOR, CK.BINARY_OPERATOR, CK.COMPOUND_ASSIGNMENT_OPERATOR,
            CK.CONDITIONAL_OPERATOR)


def _surface(b, base: str, write: bool, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor) -> Value | None:
    dims, layered = _SURFACES[base]
    loc = b.loc(c)
    name = base + ("write" if write else "read")
    out = None
    if write:
        value_c, args = args[0], args[1:]
        ttype = fn.type.argument_types()[0]
    elif args and tm.is_pointer(args[0].type):
        out, args = args[0], args[1:]
        ttype = tm.pointee(out.type)
    else:
        ttype = c.type
    ncoord = dims + (1 if layered else 0)
    if len(args) != 1 + ncoord + 1:
        raise b.error(f"{name}: unexpected arguments", c)
    handle = _parameter_behind(b, b.scalar(args[0]))
    source = next((k for k, p in enumerate(b.source_params)
                   if isinstance(handle, n.Var) and p.members == (("", handle.name),)), None)
    if source is None or not b.frames or tm.scalar_type(args[0].type) is None:
        raise b.error(f"{name} of a surface object that is not a parameter of the kernel is not supported", args[0])
    mode_v = b.expr(args[-1])
    mode_e = n.Const(2, I32) if mode_v is DEFAULT else b.scalar(args[-1])  # CUDA's default: trap
    if not isinstance(mode_e, n.Const) or int(mode_e.value) not in _MODES:
        raise b.error(f"{name} with a boundary mode that is not a constant is not supported", args[-1])
    mode = _MODES[int(mode_e.value)]
    layout = tm.elem_layout(ttype, loc)
    if layout.stride not in (1, 2, 4):
        raise b.error(f"surface accesses of type '{ttype.spelling}' are not supported", c)
    st: ScalarType = layout.scalar
    size = st.itemsize * layout.stride
    coords = [convert(b.scalar(a), I64) for a in args[1:1 + ncoord]]
    x, rest = coords[0], coords[1:]
    y = rest[0] if dims >= 2 else n.Const(0, I64, loc=loc)
    z = rest[-1] if dims == 3 or layered else n.Const(0, I64, loc=loc)
    s = handle.name
    arg = "{" + str(source) + "}"
    ptr = hidden_param(b, ("surface", s, st.name), f"{s}_{st.name}", PointerType(st, const=False),
                       f"{st.c_name} *", f"({st.c_name}*)polypy_surf_data({arg}, {dims}, {int(layered)})", loc)
    row, rows, slices = (hidden_param(b, ("surface", s, k), f"{s}_{k}", I64, "long long",
                                      f"polypy_surf_size({arg}, {i})", loc)
                         for i, k in enumerate(("row", "rows", "slices")))
    var = lambda v: n.Var(v, I64, loc=loc)  # noqa: E731
    const = lambda v: n.Const(v, I64, loc=loc)  # noqa: E731
    if not isinstance(x, n.Var) and not isinstance(x, n.Const):
        x = n.Var(b.temp(I64, x, "surf_x", c).name, I64, loc=loc)
    limits = ((x, n.Binary("sub", var(row), const(size), loc=loc)), (y, n.Binary("sub", var(rows), const(1), loc=loc)),
              (z, n.Binary("sub", var(slices), const(1), loc=loc)))
    if mode == "clamp":
        clamped = [n.Call("max", (n.Call("min", (e, hi), I64, loc=loc), const(0)), I64, loc=loc) for e, hi in limits]
        x, y, z = clamped
        inside: n.Expr = n.Binary("eq", n.Binary("rem", x, const(st.itemsize), loc=loc), const(0), loc=loc)
    else:
        inside = n.Binary("eq", n.Binary("rem", x, const(st.itemsize), loc=loc), const(0), loc=loc)
        for e, hi in limits:
            inside = n.Binary("land", inside, n.Binary("land", n.Binary("ge", e, const(0), loc=loc),
                                                       n.Binary("le", e, hi, loc=loc), loc=loc), loc=loc)
    start = n.Binary("add", n.Binary("mul", n.Binary("add", n.Binary("mul", z, var(rows), loc=loc), y, loc=loc),
                                     n.Binary("div", var(row), const(st.itemsize), loc=loc), loc=loc),
                     n.Binary("div", x, const(st.itemsize), loc=loc), loc=loc)
    index = lambda k: n.Binary("add", start, const(k), loc=loc) if k else start  # noqa: E731
    if mode == "trap" or mode == "clamp":
        # clamp: only a misaligned x is left to fail (CUDA: an error, as trap)
        with b.sub_block() as fail:
            _trap(b, name, c)
        b.emit(n.If(n.Unary("not", inside, loc=loc), tuple(fail), (), loc=loc))
        inside = n.Const(True, BOOL, loc=loc)
    if write:
        value = b.expr(value_c)
        parts = value.fields if isinstance(value, Aggregate) else {"": value}
        stores = tuple(n.Store(ptr, (index(k),), convert(parts[path], st), loc=loc)  # type: ignore[arg-type]
                       for path, k in layout.slots)
        if isinstance(inside, n.Const):
            for s_ in stores:
                b.emit(s_)
        else:
            b.emit(n.If(inside, stores, (), loc=loc))
        return None
    comps = {}
    for path, k in layout.slots:
        load: n.Expr = n.Load(ptr, (index(k),), st, loc=loc)
        if isinstance(inside, n.Const):
            comps[path] = n.Var(b.temp(st, load, "surf", c).name, st, loc=loc)
            continue
        # zero mode: 0 outside, and no load there (a branch, not a select that would load anyway)
        v = b.temp(st, n.Const(0, st, loc=loc), "surf", c)
        b.emit(n.If(inside, (n.Assign(v.name, load, loc=loc),), (), loc=loc))
        comps[path] = n.Var(v.name, st, loc=loc)
    result: Value = comps[""] if "" in comps else Aggregate(dict(comps), ttype.spelling)
    if out is None:
        return result
    b.assign(b.deref(b.expr(out), c), result, c)
    return None


def _parameter_behind(b, e: n.Expr) -> n.Expr:
    """The kernel parameter a local copies (a device function's parameter is a copy of its
    argument: ``var s_1 = s``), through copies never assigned since; else ``e``."""
    emitted = [s for block in b.outer_blocks + [b.block] for s in block]
    while isinstance(e, n.Var):
        decl = next((s for s in emitted if isinstance(s, n.Decl) and s.name == e.name), None)
        if decl is None or not isinstance(decl.init, n.Var) or decl.init.type != e.type or any(
                isinstance(x, n.Assign) and x.name == e.name for s in emitted for x in walk(s)):
            return e
        e = decl.init
    return e


def _trap(b, name: str, c: ci.Cursor) -> None:
    """What ``cudaBoundaryModeTrap`` does with an access outside the surface: the thread stops and
    the launch fails (as a failed ``assert``, whose message names the access)."""
    loc = b.loc(c)
    fn = b.frame.cursor
    where = tuple(k(d, loc=loc) for k in (n.BlockIdx, n.ThreadIdx) for d in range(3))
    file = c.location.file.name if c.location.file is not None else ""
    b.emit(n.AssertFail(f"{name} within the surface (cudaBoundaryModeTrap)", file, c.location.line,
                        f"{fn.result_type.spelling} {fn.displayname}", where, loc=loc))
    if not b.frame.is_kernel:
        if b.assert_flag is None:
            b.assert_flag = b.names.fresh("assert_failed")
        b.emit(n.Assign(b.assert_flag, n.Const(True, BOOL), loc=loc))
    b.emit(n.Return(loc=loc))


__all__ = ["hidden_arguments", "hidden_param", "is_texture_call", "texture_call"]
