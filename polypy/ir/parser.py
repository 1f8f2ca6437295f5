"""Reads the textual IR written by ``polypy.ir.printer`` back into nodes.

Used by golden pass tests: input IR text, a pass, expected IR text. Types of names come from
their declarations (parameters, ``var``, loops, buffers), so expressions need no annotations
beyond literal suffixes.
"""
from __future__ import annotations

from polypy.errors import Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.cexpr import BINARY_PREC as PRECEDENCE
from polypy.ir.cexpr import BINARY_SYMBOLS
from polypy.ir.mathfns import MATH_FUNCTIONS
from polypy.ir.tokens import Tokens
from polypy.ir.types import BOOL, I32, SCALAR_TYPES, PointerType, ScalarType, normalize_value, wrap_int

_SYMBOL_TO_BINARY = {sym: op for op, sym in BINARY_SYMBOLS.items()}
_GPU = {"threadIdx": n.ThreadIdx, "blockIdx": n.BlockIdx, "blockDim": n.BlockDim, "gridDim": n.GridDim}


class _Parser:
    def __init__(self, text: str, filename: str):
        self.filename = filename
        self.toks = Tokens(text, filename)  # the cursor (polypy.ir.tokens)
        self.vars: dict[str, ScalarType] = {}
        self.buffers: dict[str, ScalarType] = {}
        self.globals: list[n.Buffer] = []

    # -- types
    def scalar_type(self) -> ScalarType:
        name = self.toks.ident()
        if name not in SCALAR_TYPES:
            raise self.toks.error(f"unknown type {name!r}")
        return SCALAR_TYPES[name]

    def param_type(self) -> ScalarType | PointerType:
        const = self.toks.accept("const")
        elem = self.scalar_type()
        if self.toks.accept("*"):
            restrict = self.toks.accept("restrict")
            return PointerType(elem, const=const, restrict=restrict)
        return elem

    # -- module level
    def module(self) -> n.Module:
        kernels = []
        while self.toks.peek().kind != "eof":
            if self.toks.at("kernel"):
                kernels.append(self.kernel())
            else:
                self.globals.append(self.buffer_decl())
        return n.Module(tuple(kernels), tuple(self.globals), source=self.filename)

    def kernel(self) -> n.Kernel:
        loc = self.toks.loc()
        self.toks.expect("kernel")
        name = self.toks.ident()
        self.vars = {}
        self.buffers = {g.name: g.elem for g in self.globals}
        params = []
        self.toks.expect("(")
        while not self.toks.at(")"):
            ploc = self.toks.loc()
            pname = self.toks.ident()
            self.toks.expect(":")
            ptype = self.param_type()
            params.append(n.Param(pname, ptype, loc=ploc))
            if isinstance(ptype, PointerType):
                self.buffers[pname] = ptype.elem
            else:
                self.vars[pname] = ptype
            if not self.toks.accept(","):
                break
        self.toks.expect(")")
        stage = "gpu"
        if self.toks.accept("stage"):
            stage = self.toks.ident()
        coarsen = (1, 1, 1)
        if self.toks.accept("coarsen"):
            coarsen = self.coarsening()
        checks = self.names() if self.toks.accept("checks") else ()
        sliced = self.names() if self.toks.accept("sliced") else ()
        self.toks.expect("{")
        source_params = []
        buffers = []
        while True:
            if self.toks.at("source"):
                source_params.append(self.source_param())
            elif (self.toks.peek().text in ("shared", "local", "constant", "device", "extern", "frame")
                  and self.toks.peek(1).text not in ("=", "[")):
                b = self.buffer_decl()
                # A module global is printed once at module level; kernels name it again.
                same = [g for g in self.globals if g.name == b.name]
                buffers.append(same[0] if same and b.init is None else b)
            else:
                break
        body = self.block_body()
        self.toks.expect("}")
        return n.Kernel(name, tuple(params), tuple(buffers), body, stage=stage,
                        source_params=tuple(source_params), coarsen=coarsen, bounds_checks=checks,
                        checked_slices=sliced, loc=loc)

    def names(self) -> tuple[str, ...]:
        """``(a, b)`` after ``checks`` or ``sliced``: array names."""
        self.toks.expect("(")
        out = []
        while not self.toks.at(")"):
            out.append(self.toks.ident())
            if not self.toks.accept(","):
                break
        self.toks.expect(")")
        return tuple(out)

    def coarsening(self) -> tuple[int, int, int]:
        """``(4, 1, 1)`` after ``coarsen``: the factor per dimension."""
        self.toks.expect("(")
        factors = []
        for d in range(3):
            t = self.toks.next()
            if t.kind != "num" or not t.text.isdigit() or int(t.text) < 1:
                raise UserError(f"expected a positive coarsening factor, found {t.text!r}",
                                Loc(self.filename, t.line, t.col))
            factors.append(int(t.text))
            if d < 2:
                self.toks.expect(",")
        self.toks.expect(")")
        return factors[0], factors[1], factors[2]

    def source_param(self) -> n.SourceParam:
        self.toks.expect("source")
        name = self.toks.ident()
        self.toks.expect(":")
        ctype = self.toks.next().text.strip('"')
        self.toks.expect("(")
        members = []
        while not self.toks.at(")"):
            path = ""
            while self.toks.accept("."):
                path += "." + self.toks.ident()
                if self.toks.accept("("):  # an accessor's member function: `.size(0)`, `.data()`
                    arg = "" if self.toks.at(")") else self.toks.next().text
                    self.toks.expect(")")
                    path += f"({arg})"
            self.toks.expect("=")
            members.append((path, self.toks.ident()))
            if not self.toks.accept(","):
                break
        self.toks.expect(")")
        return n.SourceParam(name, ctype, tuple(members))

    def buffer_decl(self) -> n.Buffer:
        loc = self.toks.loc()
        frame = self.toks.accept("frame")  # the block function's own array (CPU form: Buffer.frame)
        extern = self.toks.accept("extern")
        space = self.toks.ident()
        if space not in n.SPACES:
            raise self.toks.error(f"unknown memory space {space!r}")
        name = self.toks.ident()
        self.toks.expect(":")
        elem = self.scalar_type()
        self.buffers[name] = elem
        shape: tuple[n.Expr, ...] | None
        if extern:
            self.toks.expect("[")
            self.toks.expect("]")
            shape = None
        else:
            dims = []
            while self.toks.accept("["):
                dims.append(self.expr())
                self.toks.expect("]")
            shape = tuple(dims)
        init = None
        if self.toks.accept("="):
            self.toks.expect("{")
            values = []
            while not self.toks.at("}"):
                c = self.unary()
                if not isinstance(c, n.Const):
                    raise self.toks.error("initializers must be literals")
                values.append(normalize_value(c.value, elem))
                if not self.toks.accept(","):
                    break
            self.toks.expect("}")
            init = tuple(values)
        part = None
        if self.toks.accept("part"):
            which = self.unary()
            self.toks.expect("/")
            count = self.unary()
            if not (isinstance(which, n.Const) and isinstance(count, n.Const)):
                raise self.toks.error("a buffer part is written 'part p/q' with integer literals")
            part = (int(which.value), int(count.value))
        symbol = self.toks.ident() if self.toks.accept("in") else None
        return n.Buffer(name, elem, shape, space, init=init, symbol=symbol, part=part, frame=frame, loc=loc)

    # -- statements
    def block_body(self) -> tuple[n.Stmt, ...]:
        stmts = []
        while not self.toks.at("}") and self.toks.peek().kind != "eof":
            stmts.append(self.stmt())
        return tuple(stmts)

    def braced(self) -> tuple[n.Stmt, ...]:
        self.toks.expect("{")
        body = self.block_body()
        self.toks.expect("}")
        return body

    def stmt(self) -> n.Stmt:
        loc = self.toks.loc()
        t = self.toks.peek()
        nxt = self.toks.peek(1).text
        if t.kind == "id" and nxt == "=" :
            name = t.text
            self.toks.i += 2
            return self.assignment_rhs(name, loc)
        if t.kind == "id" and nxt == "[" and t.text in self.buffers:
            buffer = self.toks.ident()
            index = self.index_list()
            self.toks.expect("=")
            return n.Store(buffer, index, self.expr(), loc=loc)
        word = t.text
        if word in ("var", "let") and nxt != "=":
            self.toks.next()
            name = self.toks.ident()
            self.toks.expect(":")
            vtype = self.scalar_type()
            if word == "let":
                self.toks.expect("=")  # a let has a value
            init = self.expr() if word == "let" or self.toks.accept("=") else None
            self.vars[name] = vtype
            return n.Decl(name, vtype, init, let=word == "let", loc=loc)
        if word == "barrier":
            self.toks.next()
            if self.toks.accept("."):
                if self.toks.ident() != "grid":
                    raise self.toks.error("expected barrier or barrier.grid")
                return n.Barrier("grid", loc=loc)
            return n.Barrier(loc=loc)
        if word == "syncwarp":
            self.toks.next()
            self.toks.expect("(")
            mask = self.expr()
            self.toks.expect(")")
            return n.WarpSync(mask, loc=loc)
        if word == "fence":
            self.toks.next()
            self.toks.expect(".")
            scope = self.toks.ident()
            if scope not in n.FENCE_SCOPES:
                raise self.toks.error(f"unknown fence scope {scope!r}")
            return n.Fence(scope, loc=loc)
        if word == "print" and self.toks.peek(1).kind == "str":
            self.toks.next()
            fmt = self.toks.string()
            strings: list[int] = []
            if self.toks.accept("strings"):  # the lengths of the %s arguments (n.Print.strings)
                self.toks.expect("(")
                while True:
                    t = self.toks.next()
                    if t.kind != "num" or not t.text.isdigit():
                        raise self.toks.error(f"expected a string length, found {t.text!r}")
                    strings.append(int(t.text))
                    if not self.toks.accept(","):
                        break
                self.toks.expect(")")
            args = []
            while self.toks.accept(","):
                args.append(self.expr())
            return n.Print(fmt, tuple(args), tuple(strings), loc=loc)
        if word in ("assert", "fault") and self.toks.peek(1).text == ".":
            self.toks.next()
            self.toks.expect(".")
            fault = self.toks.ident()
            if word == "assert" and fault != "fail" or word == "fault" and fault != "misaligned":
                raise self.toks.error("expected 'assert.fail' or 'fault.misaligned'")
            text = self.toks.string()
            if self.toks.ident() != "at":
                raise self.toks.error("expected 'at'")
            file = self.toks.string()
            self.toks.expect(":")
            line = self.toks.next()
            where_text, col = line.text, 0
            if word == "fault":  # `12:5` lexes as one number (with a `:suffix`)
                where_text, _, col_text = line.text.partition(":")
                if not col_text.isdigit():
                    raise self.toks.error("expected line:column")
                col = int(col_text)
            if line.kind != "num" or not where_text.isdigit():
                raise self.toks.error("expected a line number")
            if self.toks.ident() != "in":
                raise self.toks.error("expected 'in'")
            function = self.toks.string()
            where = []
            while self.toks.accept(","):
                where.append(self.expr())
            if word == "fault":
                return n.AssertFail(text, file, int(where_text), function, tuple(where), fault=fault, col=col, loc=loc)
            return n.AssertFail(text, file, int(line.text), function, tuple(where), loc=loc)
        if word == "launch" and self.toks.peek(1).kind == "id" or word == "launch" and self.toks.peek(1).text == ".":
            return self.launch(loc)
        if word == "prefetch":
            self.toks.next()
            buffer = self.toks.ident()
            return n.Prefetch(buffer, self.index_list(), loc=loc)
        if word == "break":
            self.toks.next()
            return n.Break(loc=loc)
        if word == "continue":
            self.toks.next()
            return n.Continue(loc=loc)
        if word == "return":
            self.toks.next()
            return n.Return(loc=loc)
        if word == "atomic":
            return self.atomic(None, loc)
        if word == "if":
            return self.if_stmt()
        if word == "for":
            self.toks.next()
            kind = "threads" if self.toks.accept("threads") else "serial"
            ordered = kind == "threads" and self.toks.accept("(")
            if ordered:
                self.toks.expect("ordered")
                self.toks.expect(")")
            var = self.toks.ident()
            self.toks.expect(":")
            vtype = self.scalar_type()
            self.toks.expect("=")
            start = self.expr()
            self.toks.expect("to")
            stop = self.expr()
            self.toks.expect("step")
            step = self.expr()
            self.vars[var] = vtype
            body = self.braced()
            return n.For(var, vtype, start, stop, step, body, kind=kind, ordered=ordered, loc=loc)
        if word == "while":
            self.toks.next()
            self.toks.expect("(")
            cond = self.expr()
            self.toks.expect(")")
            body = self.braced()
            update: tuple[n.Stmt, ...] = ()
            if self.toks.accept("update"):
                update = self.braced()
            return n.While(cond, body, update, loc=loc)
        raise self.toks.error(f"expected a statement, found {word!r}")

    def assignment_rhs(self, name: str, loc: Loc) -> n.Stmt:
        if self.toks.at("atomic"):
            return self.atomic(name, loc)
        if self.toks.at("shfl") and self.toks.peek(1).text == ".":
            self.toks.next()
            self.toks.expect(".")
            mode = self.toks.ident()
            self.toks.expect("(")
            mask, value, lane, width = self.expr(), None, None, None
            self.toks.expect(",")
            value = self.expr()
            self.toks.expect(",")
            lane = self.expr()
            self.toks.expect(",")
            width = self.expr()
            self.toks.expect(")")
            return n.Shuffle(name, mode, value, lane, width, mask, loc=loc)
        if self.toks.at("vote") and self.toks.peek(1).text == ".":
            self.toks.next()
            self.toks.expect(".")
            mode = self.toks.ident()
            self.toks.expect("(")
            mask = self.expr()
            self.toks.expect(",")
            pred = self.expr()
            self.toks.expect(")")
            return n.Vote(name, mode, pred, mask, loc=loc)
        if name not in self.vars:
            raise UserError(f"assignment to undeclared variable {name!r}", loc)
        return n.Assign(name, self.expr(), loc=loc)

    def launch(self, loc: Loc) -> n.Stmt:
        self.toks.expect("launch")
        stream = "stream"
        if self.toks.accept("."):
            stream = self.toks.ident()
            if stream not in n.LAUNCH_STREAMS:
                raise self.toks.error(f"unknown launch stream {stream!r}")
        kernel = self.toks.ident()
        extents = []
        for word in ("grid", "block"):
            self.toks.expect(word)
            self.toks.expect("(")
            dims = [self.expr()]
            while self.toks.accept(","):
                dims.append(self.expr())
            self.toks.expect(")")
            extents.append(tuple(dims))
        self.toks.expect("shmem")
        self.toks.expect("(")
        shmem = self.expr()
        self.toks.expect(")")
        self.toks.expect("(")
        args: list[n.Expr] = []
        pointers: list[str | None] = []
        while not self.toks.at(")"):
            if args:
                self.toks.expect(",")
            if self.toks.accept("&"):
                pointers.append(self.toks.ident())
                self.toks.expect("[")
                args.append(self.expr())
                self.toks.expect("]")
            else:
                pointers.append(None)
                args.append(self.expr())
        self.toks.expect(")")
        return n.Launch(kernel, extents[0], extents[1], shmem, tuple(args), tuple(pointers), stream, loc=loc)

    def atomic(self, dest: str | None, loc: Loc) -> n.Stmt:
        self.toks.expect("atomic")
        self.toks.expect(".")
        op = self.toks.ident()
        buffer = self.toks.ident()
        index = self.index_list()
        self.toks.expect(",")
        first = self.expr()
        compare = None
        if self.toks.accept(","):
            compare, value = first, self.expr()
        else:
            value = first
        return n.AtomicRMW(op, buffer, index, value, dest, compare, loc=loc)

    def if_stmt(self) -> n.If:
        loc = self.toks.loc()
        self.toks.expect("if")
        self.toks.expect("(")
        cond = self.expr()
        self.toks.expect(")")
        then = self.braced()
        orelse: tuple[n.Stmt, ...] = ()
        if self.toks.accept("else"):
            if self.toks.at("if"):
                orelse = (self.if_stmt(),)
            else:
                orelse = self.braced()
        return n.If(cond, then, orelse, loc=loc)

    def index_list(self) -> tuple[n.Expr, ...]:
        index = []
        while self.toks.accept("["):
            index.append(self.expr())
            self.toks.expect("]")
        return tuple(index)

    # -- expressions (precedence climbing)
    def expr(self) -> n.Expr:
        cond = self.binary(1)
        if self.toks.accept("?"):
            a = self.expr()
            self.toks.expect(":")
            b = self.expr()
            return n.Select(cond, a, b, loc=cond.loc)
        return cond

    def binary(self, min_prec: int) -> n.Expr:
        left = self.unary()
        while True:
            t = self.toks.peek()
            op = _SYMBOL_TO_BINARY.get(t.text) if t.kind == "op" else None
            if op is None or PRECEDENCE[op] < min_prec:
                return left
            self.toks.next()
            right = self.binary(PRECEDENCE[op] + 1)
            left = n.Binary(op, left, right, loc=left.loc)

    def unary(self) -> n.Expr:
        loc = self.toks.loc()
        if self.toks.at("-") and self.toks.peek(1).kind in ("num",) or (self.toks.at("-") and self.toks.peek(1).text in ("inf", "inff")):
            self.toks.next()
            c = self.literal()
            value = -c.value
            if c.ctype.is_int:
                value = wrap_int(int(value), c.ctype)
            return n.Const(value, c.ctype, loc=loc)
        for sym, op in (("-", "neg"), ("!", "not"), ("~", "bnot")):
            if self.toks.accept(sym):
                return n.Unary(op, self.unary(), loc=loc)
        if self.toks.at("(") and self.toks.peek(1).text in SCALAR_TYPES and self.toks.peek(2).text == ")":
            self.toks.next()
            to = self.scalar_type()
            self.toks.expect(")")
            return n.Cast(to, self.unary(), loc=loc)
        return self.primary()

    def literal(self) -> n.Const:
        loc = self.toks.loc()
        t = self.toks.next()
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
        loc = self.toks.loc()
        t = self.toks.peek()
        if t.kind == "num" or t.text in ("inf", "inff", "nan", "nanf"):
            return self.literal()
        if self.toks.accept("("):
            e = self.expr()
            self.toks.expect(")")
            return e
        if t.kind != "id":
            raise self.toks.error(f"expected an expression, found {t.text!r}")
        name = self.toks.ident()
        if name in ("true", "false"):
            return n.Const(name == "true", BOOL, loc=loc)
        if name in _GPU and self.toks.at("."):
            self.toks.next()
            dim = "xyz".index(self.toks.ident())
            return _GPU[name](dim, loc=loc)
        if name in ("bitcast", "texture") and self.toks.at("<") and self.toks.peek(1).text in SCALAR_TYPES and \
                self.toks.peek(2).text == ">":
            self.toks.next()
            to = self.scalar_type()
            self.toks.expect(">")
            self.toks.expect("(")
            xs = [self.expr()]
            while self.toks.accept(","):
                xs.append(self.expr())
            self.toks.expect(")")
            return n.Call(name, tuple(xs), to, loc=loc)
        if self.toks.at("(") and name in MATH_FUNCTIONS:
            self.toks.next()
            args = []
            while not self.toks.at(")"):
                args.append(self.expr())
                if not self.toks.accept(","):
                    break
            self.toks.expect(")")
            fn = MATH_FUNCTIONS[name]
            rtype = BOOL if fn.returns_bool else args[0].type
            return n.Call(name, tuple(args), rtype, loc=loc)
        if name in self.buffers and self.toks.at("["):
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
