"""Reads the textual IR written by ``polypy.ir.printer`` back into nodes.

Used by golden pass tests: input IR text, a pass, expected IR text. Types of names come from
their declarations (parameters, ``var``, loops, buffers), so expressions need no annotations
beyond literal suffixes.
"""
from __future__ import annotations

import json
import re

from polypy.errors import Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.cexpr import BINARY_PREC as PRECEDENCE
from polypy.ir.cexpr import BINARY_SYMBOLS
from polypy.ir.mathfns import MATH_FUNCTIONS
from polypy.ir.types import BOOL, I32, SCALAR_TYPES, PointerType, ScalarType, normalize_value, wrap_int

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n]+|//[^\n]*)
  | (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?:ul|u|l|f|:[a-z0-9]+)?)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<id>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<op><<|>>|<=|>=|==|!=|&&|\|\||[-+*/%<>&|^!~?:=(){}\[\],.])
    """,
    re.VERBOSE,
)

_SYMBOL_TO_BINARY = {sym: op for op, sym in BINARY_SYMBOLS.items()}
_GPU = {"threadIdx": n.ThreadIdx, "blockIdx": n.BlockIdx, "blockDim": n.BlockDim, "gridDim": n.GridDim}


class _Tok:
    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind: str, text: str, line: int, col: int):
        self.kind, self.text, self.line, self.col = kind, text, line, col


def _lex(text: str, filename: str) -> list[_Tok]:
    tokens = []
    pos = 0
    line, line_start = 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise UserError(f"unexpected character {text[pos]!r} in IR text", Loc(filename, line, pos - line_start + 1))
        kind = m.lastgroup
        value = m.group()
        if kind != "ws":
            tokens.append(_Tok(kind, value, line, pos - line_start + 1))
        newlines = value.count("\n")
        if newlines:
            line += newlines
            line_start = pos + value.rindex("\n") + 1
        pos = m.end()
    tokens.append(_Tok("eof", "", line, pos - line_start + 1))
    return tokens


class _Parser:
    def __init__(self, text: str, filename: str):
        self.filename = filename
        self.toks = _lex(text, filename)
        self.i = 0
        self.vars: dict[str, ScalarType] = {}
        self.buffers: dict[str, ScalarType] = {}
        self.globals: list[n.Buffer] = []

    # -- token helpers
    def peek(self, k: int = 0) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def loc(self) -> Loc:
        t = self.peek()
        return Loc(self.filename, t.line, t.col)

    def error(self, message: str) -> UserError:
        return UserError(message, self.loc())

    def next(self) -> _Tok:
        t = self.peek()
        self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.peek().text == text and self.peek().kind != "str"

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> _Tok:
        if not self.at(text):
            raise self.error(f"expected {text!r}, found {self.peek().text!r}")
        return self.next()

    def ident(self) -> str:
        t = self.peek()
        if t.kind != "id":
            raise self.error(f"expected a name, found {t.text!r}")
        self.i += 1
        return t.text

    def string(self) -> str:
        t = self.peek()
        if t.kind != "str":
            raise self.error(f"expected a string, found {t.text!r}")
        self.i += 1
        return json.loads(t.text)

    # -- types
    def scalar_type(self) -> ScalarType:
        name = self.ident()
        if name not in SCALAR_TYPES:
            raise self.error(f"unknown type {name!r}")
        return SCALAR_TYPES[name]

    def param_type(self) -> ScalarType | PointerType:
        const = self.accept("const")
        elem = self.scalar_type()
        if self.accept("*"):
            restrict = self.accept("restrict")
            return PointerType(elem, const=const, restrict=restrict)
        return elem

    # -- module level
    def module(self) -> n.Module:
        kernels = []
        while self.peek().kind != "eof":
            if self.at("kernel"):
                kernels.append(self.kernel())
            else:
                self.globals.append(self.buffer_decl())
        return n.Module(tuple(kernels), tuple(self.globals), source=self.filename)

    def kernel(self) -> n.Kernel:
        loc = self.loc()
        self.expect("kernel")
        name = self.ident()
        self.vars = {}
        self.buffers = {g.name: g.elem for g in self.globals}
        params = []
        self.expect("(")
        while not self.at(")"):
            ploc = self.loc()
            pname = self.ident()
            self.expect(":")
            ptype = self.param_type()
            params.append(n.Param(pname, ptype, loc=ploc))
            if isinstance(ptype, PointerType):
                self.buffers[pname] = ptype.elem
            else:
                self.vars[pname] = ptype
            if not self.accept(","):
                break
        self.expect(")")
        stage = "gpu"
        if self.accept("stage"):
            stage = self.ident()
        coarsen = (1, 1, 1)
        if self.accept("coarsen"):
            coarsen = self.coarsening()
        self.expect("{")
        source_params = []
        buffers = []
        while True:
            if self.at("source"):
                source_params.append(self.source_param())
            elif (self.peek().text in ("shared", "local", "constant", "device", "extern", "frame")
                  and self.peek(1).text not in ("=", "[")):
                b = self.buffer_decl()
                # A module global is printed once at module level; kernels name it again.
                same = [g for g in self.globals if g.name == b.name]
                buffers.append(same[0] if same and b.init is None else b)
            else:
                break
        body = self.block_body()
        self.expect("}")
        return n.Kernel(name, tuple(params), tuple(buffers), body, stage=stage,
                        source_params=tuple(source_params), coarsen=coarsen, loc=loc)

    def coarsening(self) -> tuple[int, int, int]:
        """``(4, 1, 1)`` after ``coarsen``: the factor per dimension."""
        self.expect("(")
        factors = []
        for d in range(3):
            t = self.next()
            if t.kind != "num" or not t.text.isdigit() or int(t.text) < 1:
                raise UserError(f"expected a positive coarsening factor, found {t.text!r}",
                                Loc(self.filename, t.line, t.col))
            factors.append(int(t.text))
            if d < 2:
                self.expect(",")
        self.expect(")")
        return factors[0], factors[1], factors[2]

    def source_param(self) -> n.SourceParam:
        self.expect("source")
        name = self.ident()
        self.expect(":")
        ctype = self.next().text.strip('"')
        self.expect("(")
        members = []
        while not self.at(")"):
            path = ""
            while self.accept("."):
                path += "." + self.ident()
                if self.accept("("):  # an accessor's member function: `.size(0)`, `.data()`
                    arg = "" if self.at(")") else self.next().text
                    self.expect(")")
                    path += f"({arg})"
            self.expect("=")
            members.append((path, self.ident()))
            if not self.accept(","):
                break
        self.expect(")")
        return n.SourceParam(name, ctype, tuple(members))

    def buffer_decl(self) -> n.Buffer:
        loc = self.loc()
        frame = self.accept("frame")  # the block function's own array (CPU form: Buffer.frame)
        extern = self.accept("extern")
        space = self.ident()
        if space not in n.SPACES:
            raise self.error(f"unknown memory space {space!r}")
        name = self.ident()
        self.expect(":")
        elem = self.scalar_type()
        self.buffers[name] = elem
        shape: tuple[n.Expr, ...] | None
        if extern:
            self.expect("[")
            self.expect("]")
            shape = None
        else:
            dims = []
            while self.accept("["):
                dims.append(self.expr())
                self.expect("]")
            shape = tuple(dims)
        init = None
        if self.accept("="):
            self.expect("{")
            values = []
            while not self.at("}"):
                c = self.unary()
                if not isinstance(c, n.Const):
                    raise self.error("initializers must be literals")
                values.append(normalize_value(c.value, elem))
                if not self.accept(","):
                    break
            self.expect("}")
            init = tuple(values)
        part = None
        if self.accept("part"):
            which = self.unary()
            self.expect("/")
            count = self.unary()
            if not (isinstance(which, n.Const) and isinstance(count, n.Const)):
                raise self.error("a buffer part is written 'part p/q' with integer literals")
            part = (int(which.value), int(count.value))
        symbol = self.ident() if self.accept("in") else None
        return n.Buffer(name, elem, shape, space, init=init, symbol=symbol, part=part, frame=frame, loc=loc)

    # -- statements
    def block_body(self) -> tuple[n.Stmt, ...]:
        stmts = []
        while not self.at("}") and self.peek().kind != "eof":
            stmts.append(self.stmt())
        return tuple(stmts)

    def braced(self) -> tuple[n.Stmt, ...]:
        self.expect("{")
        body = self.block_body()
        self.expect("}")
        return body

    def stmt(self) -> n.Stmt:
        loc = self.loc()
        t = self.peek()
        nxt = self.peek(1).text
        if t.kind == "id" and nxt == "=" :
            name = t.text
            self.i += 2
            return self.assignment_rhs(name, loc)
        if t.kind == "id" and nxt == "[" and t.text in self.buffers:
            buffer = self.ident()
            index = self.index_list()
            self.expect("=")
            return n.Store(buffer, index, self.expr(), loc=loc)
        word = t.text
        if word == "var":
            self.next()
            name = self.ident()
            self.expect(":")
            vtype = self.scalar_type()
            init = self.expr() if self.accept("=") else None
            self.vars[name] = vtype
            return n.Decl(name, vtype, init, loc=loc)
        if word == "barrier":
            self.next()
            if self.accept("."):
                if self.ident() != "grid":
                    raise self.error("expected barrier or barrier.grid")
                return n.Barrier("grid", loc=loc)
            return n.Barrier(loc=loc)
        if word == "syncwarp":
            self.next()
            self.expect("(")
            mask = self.expr()
            self.expect(")")
            return n.WarpSync(mask, loc=loc)
        if word == "fence":
            self.next()
            self.expect(".")
            scope = self.ident()
            if scope not in n.FENCE_SCOPES:
                raise self.error(f"unknown fence scope {scope!r}")
            return n.Fence(scope, loc=loc)
        if word == "print" and self.peek(1).kind == "str":
            self.next()
            fmt = self.string()
            args = []
            while self.accept(","):
                args.append(self.expr())
            return n.Print(fmt, tuple(args), loc=loc)
        if word in ("assert", "fault") and self.peek(1).text == ".":
            self.next()
            self.expect(".")
            fault = self.ident()
            if word == "assert" and fault != "fail" or word == "fault" and fault != "misaligned":
                raise self.error("expected 'assert.fail' or 'fault.misaligned'")
            text = self.string()
            if self.ident() != "at":
                raise self.error("expected 'at'")
            file = self.string()
            self.expect(":")
            line = self.next()
            where_text, col = line.text, 0
            if word == "fault":  # `12:5` lexes as one number (with a `:suffix`)
                where_text, _, col_text = line.text.partition(":")
                if not col_text.isdigit():
                    raise self.error("expected line:column")
                col = int(col_text)
            if line.kind != "num" or not where_text.isdigit():
                raise self.error("expected a line number")
            if self.ident() != "in":
                raise self.error("expected 'in'")
            function = self.string()
            where = []
            while self.accept(","):
                where.append(self.expr())
            if word == "fault":
                return n.AssertFail(text, file, int(where_text), function, tuple(where), fault=fault, col=col, loc=loc)
            return n.AssertFail(text, file, int(line.text), function, tuple(where), loc=loc)
        if word == "launch" and self.peek(1).kind == "id" or word == "launch" and self.peek(1).text == ".":
            return self.launch(loc)
        if word == "prefetch":
            self.next()
            buffer = self.ident()
            return n.Prefetch(buffer, self.index_list(), loc=loc)
        if word == "break":
            self.next()
            return n.Break(loc=loc)
        if word == "continue":
            self.next()
            return n.Continue(loc=loc)
        if word == "return":
            self.next()
            return n.Return(loc=loc)
        if word == "atomic":
            return self.atomic(None, loc)
        if word == "if":
            return self.if_stmt()
        if word == "for":
            self.next()
            kind = "threads" if self.accept("threads") else "serial"
            ordered = kind == "threads" and self.accept("(")
            if ordered:
                self.expect("ordered")
                self.expect(")")
            var = self.ident()
            self.expect(":")
            vtype = self.scalar_type()
            self.expect("=")
            start = self.expr()
            self.expect("to")
            stop = self.expr()
            self.expect("step")
            step = self.expr()
            self.vars[var] = vtype
            body = self.braced()
            return n.For(var, vtype, start, stop, step, body, kind=kind, ordered=ordered, loc=loc)
        if word == "while":
            self.next()
            self.expect("(")
            cond = self.expr()
            self.expect(")")
            body = self.braced()
            update: tuple[n.Stmt, ...] = ()
            if self.accept("update"):
                update = self.braced()
            return n.While(cond, body, update, loc=loc)
        raise self.error(f"expected a statement, found {word!r}")

    def assignment_rhs(self, name: str, loc: Loc) -> n.Stmt:
        if self.at("atomic"):
            return self.atomic(name, loc)
        if self.at("shfl") and self.peek(1).text == ".":
            self.next()
            self.expect(".")
            mode = self.ident()
            self.expect("(")
            mask, value, lane, width = self.expr(), None, None, None
            self.expect(",")
            value = self.expr()
            self.expect(",")
            lane = self.expr()
            self.expect(",")
            width = self.expr()
            self.expect(")")
            return n.Shuffle(name, mode, value, lane, width, mask, loc=loc)
        if self.at("vote") and self.peek(1).text == ".":
            self.next()
            self.expect(".")
            mode = self.ident()
            self.expect("(")
            mask = self.expr()
            self.expect(",")
            pred = self.expr()
            self.expect(")")
            return n.Vote(name, mode, pred, mask, loc=loc)
        if name not in self.vars:
            raise UserError(f"assignment to undeclared variable {name!r}", loc)
        return n.Assign(name, self.expr(), loc=loc)

    def launch(self, loc: Loc) -> n.Stmt:
        self.expect("launch")
        stream = "stream"
        if self.accept("."):
            stream = self.ident()
            if stream not in n.LAUNCH_STREAMS:
                raise self.error(f"unknown launch stream {stream!r}")
        kernel = self.ident()
        extents = []
        for word in ("grid", "block"):
            self.expect(word)
            self.expect("(")
            dims = [self.expr()]
            while self.accept(","):
                dims.append(self.expr())
            self.expect(")")
            extents.append(tuple(dims))
        self.expect("shmem")
        self.expect("(")
        shmem = self.expr()
        self.expect(")")
        self.expect("(")
        args: list[n.Expr] = []
        pointers: list[str | None] = []
        while not self.at(")"):
            if args:
                self.expect(",")
            if self.accept("&"):
                pointers.append(self.ident())
                self.expect("[")
                args.append(self.expr())
                self.expect("]")
            else:
                pointers.append(None)
                args.append(self.expr())
        self.expect(")")
        return n.Launch(kernel, extents[0], extents[1], shmem, tuple(args), tuple(pointers), stream, loc=loc)

    def atomic(self, dest: str | None, loc: Loc) -> n.Stmt:
        self.expect("atomic")
        self.expect(".")
        op = self.ident()
        buffer = self.ident()
        index = self.index_list()
        self.expect(",")
        first = self.expr()
        compare = None
        if self.accept(","):
            compare, value = first, self.expr()
        else:
            value = first
        return n.AtomicRMW(op, buffer, index, value, dest, compare, loc=loc)

    def if_stmt(self) -> n.If:
        loc = self.loc()
        self.expect("if")
        self.expect("(")
        cond = self.expr()
        self.expect(")")
        then = self.braced()
        orelse: tuple[n.Stmt, ...] = ()
        if self.accept("else"):
            if self.at("if"):
                orelse = (self.if_stmt(),)
            else:
                orelse = self.braced()
        return n.If(cond, then, orelse, loc=loc)

    def index_list(self) -> tuple[n.Expr, ...]:
        index = []
        while self.accept("["):
            index.append(self.expr())
            self.expect("]")
        return tuple(index)

    # -- expressions (precedence climbing)
    def expr(self) -> n.Expr:
        cond = self.binary(1)
        if self.accept("?"):
            a = self.expr()
            self.expect(":")
            b = self.expr()
            return n.Select(cond, a, b, loc=cond.loc)
        return cond

    def binary(self, min_prec: int) -> n.Expr:
        left = self.unary()
        while True:
            t = self.peek()
            op = _SYMBOL_TO_BINARY.get(t.text) if t.kind == "op" else None
            if op is None or PRECEDENCE[op] < min_prec:
                return left
            self.next()
            right = self.binary(PRECEDENCE[op] + 1)
            left = n.Binary(op, left, right, loc=left.loc)

    def unary(self) -> n.Expr:
        loc = self.loc()
        if self.at("-") and self.peek(1).kind in ("num",) or (self.at("-") and self.peek(1).text in ("inf", "inff")):
            self.next()
            c = self.literal()
            value = -c.value
            if c.ctype.is_int:
                value = wrap_int(int(value), c.ctype)
            return n.Const(value, c.ctype, loc=loc)
        for sym, op in (("-", "neg"), ("!", "not"), ("~", "bnot")):
            if self.accept(sym):
                return n.Unary(op, self.unary(), loc=loc)
        if self.at("(") and self.peek(1).text in SCALAR_TYPES and self.peek(2).text == ")":
            self.next()
            to = self.scalar_type()
            self.expect(")")
            return n.Cast(to, self.unary(), loc=loc)
        return self.primary()

    def literal(self) -> n.Const:
        loc = self.loc()
        t = self.next()
        text = t.text
        if text in ("inf", "inff", "nan", "nanf"):
            ty = SCALAR_TYPES["f32"] if text in ("inff", "nanf") else SCALAR_TYPES["f64"]
            return n.Const(float(text[:3]), ty, loc=loc)
        if t.kind != "num":
            raise UserError(f"expected a literal, found {text!r}", loc)
        if ":" in text:
            digits, tname = text.split(":")
            ty = SCALAR_TYPES.get(tname)
            if ty is None:
                raise UserError(f"unknown type {tname!r}", loc)
            return n.Const(normalize_value(float(digits) if ty.is_float else int(digits), ty), ty, loc=loc)
        if text.endswith("ul"):
            return n.Const(int(text[:-2]), SCALAR_TYPES["u64"], loc=loc)
        if text.endswith("u"):
            return n.Const(int(text[:-1]), SCALAR_TYPES["u32"], loc=loc)
        if text.endswith("l"):
            return n.Const(int(text[:-1]), SCALAR_TYPES["i64"], loc=loc)
        if text.endswith("f"):
            ty = SCALAR_TYPES["f32"]
            return n.Const(normalize_value(float(text[:-1]), ty), ty, loc=loc)
        if any(ch in text for ch in ".eE"):
            return n.Const(float(text), SCALAR_TYPES["f64"], loc=loc)
        return n.Const(wrap_int(int(text), I32), I32, loc=loc)

    def primary(self) -> n.Expr:
        loc = self.loc()
        t = self.peek()
        if t.kind == "num" or t.text in ("inf", "inff", "nan", "nanf"):
            return self.literal()
        if self.accept("("):
            e = self.expr()
            self.expect(")")
            return e
        if t.kind != "id":
            raise self.error(f"expected an expression, found {t.text!r}")
        name = self.ident()
        if name in ("true", "false"):
            return n.Const(name == "true", BOOL, loc=loc)
        if name in _GPU and self.at("."):
            self.next()
            dim = "xyz".index(self.ident())
            return _GPU[name](dim, loc=loc)
        if name in ("bitcast", "texture") and self.at("<") and self.peek(1).text in SCALAR_TYPES and \
                self.peek(2).text == ">":
            self.next()
            to = self.scalar_type()
            self.expect(">")
            self.expect("(")
            xs = [self.expr()]
            while self.accept(","):
                xs.append(self.expr())
            self.expect(")")
            return n.Call(name, tuple(xs), to, loc=loc)
        if self.at("(") and name in MATH_FUNCTIONS:
            self.next()
            args = []
            while not self.at(")"):
                args.append(self.expr())
                if not self.accept(","):
                    break
            self.expect(")")
            fn = MATH_FUNCTIONS[name]
            rtype = BOOL if fn.returns_bool else args[0].type
            return n.Call(name, tuple(args), rtype, loc=loc)
        if name in self.buffers and self.at("["):
            return n.Load(name, self.index_list(), self.buffers[name], loc=loc)
        if name in self.vars:
            return n.Var(name, self.vars[name], loc=loc)
        raise UserError(f"unknown name {name!r}", loc)


def parse_module(text: str, *, filename: str = "<ir>") -> n.Module:
    return _Parser(text, filename).module()


def parse_kernel(text: str, *, filename: str = "<ir>") -> n.Kernel:
    module = parse_module(text, filename=filename)
    if len(module.kernels) != 1:
        raise UserError(f"expected exactly one kernel in IR text, found {len(module.kernels)}")
    return module.kernels[0]
