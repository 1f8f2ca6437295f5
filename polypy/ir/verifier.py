"""Checks the invariants every pass must preserve; raises ``InternalError`` when one breaks.

* every name is declared once (parameters, ``var``, loop variables) and used in its scope;
* types agree (operands of a binary operation, values stored, assigned, returned by atomics);
* buffers exist and are indexed with the right number of integer indices;
* ``break``/``continue`` appear inside loops; a ``For`` variable is not assigned in its body;
* stage rules: GPU form has no thread loops; CPU form has no ``threadIdx``, barriers or warp
  operations (they have been lowered).
"""
from __future__ import annotations

from polypy.errors import InternalError, Loc
from polypy.ir import nodes as n
from polypy.ir.mathfns import MATH_FUNCTIONS, is_bit_cast
from polypy.ir.textures import TEXTURE, texture_signature_problem
from polypy.ir.printf import FormatError, print_arg_types
from polypy.ir.types import BOOL, I32, U32, U64, PointerType, ScalarType


class _Verifier:
    def __init__(self, kernel: n.Kernel):
        self.kernel = kernel
        self.declared: set[str] = set()
        self.scopes: list[dict[str, ScalarType]] = [{}]
        self.loop_depth = 0
        self.for_vars: list[str] = []
        self.lets: set[str] = set()  # names of lets (names are unique in a kernel)
        self.buffers: dict[str, tuple[ScalarType, int, str]] = {}

    def fail(self, message: str, node: n.Node | None) -> None:
        loc: Loc | None = node.loc if node is not None else None
        raise InternalError(f"invalid IR in kernel {self.kernel.name!r}: {message}", loc)

    # -- names
    def declare(self, name: str, ty: ScalarType, node: n.Node) -> None:
        if name in self.declared:
            self.fail(f"{name!r} is declared twice", node)
        self.declared.add(name)
        self.scopes[-1][name] = ty

    def lookup(self, name: str, node: n.Node) -> ScalarType:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        self.fail(f"{name!r} is used outside the scope of its declaration", node)
        raise AssertionError  # unreachable

    def scoped(self, body: tuple[n.Stmt, ...]) -> None:
        self.scopes.append({})
        for s in body:
            self.stmt(s)
        self.scopes.pop()

    # -- kernel
    def run(self) -> None:
        k = self.kernel
        if k.stage not in n.STAGES:
            self.fail(f"unknown stage {k.stage!r}", k)
        if len(k.coarsen) != 3 or min(k.coarsen) < 1 or (k.stage != "cpu" and k.coarsen != (1, 1, 1)):
            self.fail(f"coarsening {k.coarsen!r}: three positive factors, and only in CPU form", k)
        if (k.bounds_checks or k.checked_slices) and k.stage != "cpu":
            self.fail("bounds checks only in CPU form", k)
        arrays = {p.name for p in k.params if isinstance(p.ptype, PointerType)} | \
            {b.name for b in k.buffers} | {b.symbol for b in k.buffers if b.part is not None}
        for name in k.bounds_checks + k.checked_slices:
            if name not in arrays:
                self.fail(f"bounds checks of {name!r}, which is no array of the kernel", k)
        if not set(k.checked_slices) <= set(k.bounds_checks):
            self.fail("checked slices of arrays not bounds-checked", k)
        for p in k.params:
            if isinstance(p.ptype, PointerType):
                if p.name in self.declared:
                    self.fail(f"{p.name!r} is declared twice", p)
                self.declared.add(p.name)
                self.buffers[p.name] = (p.ptype.elem, 1, "global")
            else:
                self.declare(p.name, p.ptype, p)
        for b in k.buffers:
            if b.name in self.declared:
                self.fail(f"{b.name!r} is declared twice", b)
            if b.space not in n.SPACES:
                self.fail(f"buffer {b.name!r} has unknown space {b.space!r}", b)
            self.declared.add(b.name)
            rank = 1 if b.shape is None else len(b.shape)
            if b.shape is None and b.space != "shared":
                self.fail(f"only shared buffers may be sized at launch ({b.name!r})", b)
            if b.part is not None:
                p, q = b.part
                if b.shape is not None or b.symbol is None or not 0 <= p < q:
                    self.fail(f"buffer {b.name!r}: only an extern shared buffer viewing another may be a part "
                              f"(0 <= p < q), got part {p}/{q}", b)
            if b.frame and (b.space != "shared" or b.shape is None or self.kernel.stage != "cpu"
                            or not all(isinstance(d, n.Const) for d in b.shape)):
                self.fail(f"buffer {b.name!r}: only a CPU-form shared buffer of constant shape may live in the "
                          f"block function's frame", b)
            if b.shape is not None:
                for d in b.shape:
                    self.expr(d)
                    if not d.type.is_int:
                        self.fail(f"buffer {b.name!r} has a non-integer extent", b)
            self.buffers[b.name] = (b.elem, rank, b.space)
        self.scoped(k.body)

    # -- statements
    def stmt(self, s: n.Stmt) -> None:
        gpu = self.kernel.stage == "gpu"
        if isinstance(s, n.Decl):
            if s.init is not None:
                self.same(self.expr(s.init), s.vtype, s, "initializer")
            elif s.let:
                self.fail(f"let {s.name!r} has no value", s)
            self.declare(s.name, s.vtype, s)
            if s.let:
                self.lets.add(s.name)
        elif isinstance(s, n.Assign):
            ty = self.lookup(s.name, s)
            if s.name in self.for_vars:
                self.fail(f"loop variable {s.name!r} is assigned in its loop", s)
            if s.name in self.lets:
                self.fail(f"let {s.name!r} is assigned", s)
            self.same(self.expr(s.value), ty, s, "assigned value")
        elif isinstance(s, n.Store):
            elem = self.access(s.buffer, s.index, s)
            self.same(self.expr(s.value), elem, s, "stored value")
        elif isinstance(s, n.AtomicRMW):
            if s.op not in n.ATOMIC_OPS:
                self.fail(f"unknown atomic operation {s.op!r}", s)
            elem = self.access(s.buffer, s.index, s)
            self.same(self.expr(s.value), elem, s, "atomic operand")
            if (s.op == "cas") != (s.compare is not None):
                self.fail("atomic.cas needs a compare operand (and only cas has one)", s)
            if s.compare is not None:
                self.same(self.expr(s.compare), elem, s, "compare operand")
            if s.dest is not None:
                self.same(self.lookup(s.dest, s), elem, s, "atomic result variable")
                if s.dest in self.lets:
                    self.fail(f"let {s.dest!r} is assigned", s)
        elif isinstance(s, n.Barrier):
            if s.scope not in ("block", "grid"):
                self.fail(f"unknown barrier scope {s.scope!r}", s)
            if not gpu and s.scope != "grid":
                self.fail("barrier in CPU form", s)
        elif isinstance(s, n.WarpSync):
            if not gpu:
                self.fail("syncwarp in CPU form", s)
            self.expr(s.mask)
        elif isinstance(s, n.Fence):
            if s.scope not in n.FENCE_SCOPES:
                self.fail(f"unknown fence scope {s.scope!r}", s)
        elif isinstance(s, n.Print):
            try:
                wanted = print_arg_types(s.format, s.strings)
            except FormatError as exc:
                self.fail(str(exc), s)
            if len(wanted) != len(s.args):
                self.fail(f"print has {len(s.args)} arguments for {len(wanted)}", s)
            for (t, text), a in zip(wanted, s.args):
                self.same(self.expr(a), t, s, f"argument of {text}")
        elif isinstance(s, n.Launch):
            self.launch(s)
        elif isinstance(s, n.AssertFail):
            if len(s.where) != 6:
                self.fail("assert.fail needs the block and thread indices", s)
            if s.fault not in ("assert", "misaligned"):
                self.fail(f"unknown device fault {s.fault!r}", s)
            for w in s.where:
                self.same(self.expr(w), U32, s, "block or thread index")
        elif isinstance(s, n.Prefetch):
            if gpu:
                self.fail("prefetch in GPU form", s)
            self.access(s.buffer, s.index, s)
        elif isinstance(s, n.Shuffle):
            if not gpu:
                self.fail("warp shuffle in CPU form", s)
            if s.mode not in n.SHUFFLE_MODES:
                self.fail(f"unknown shuffle mode {s.mode!r}", s)
            vt = self.expr(s.value)
            for e in (s.lane, s.width, s.mask):
                self.integer(self.expr(e), s)
            self.same(self.lookup(s.dest, s), vt, s, "shuffle result variable")
            if s.dest in self.lets:
                self.fail(f"let {s.dest!r} is assigned", s)
        elif isinstance(s, n.Vote):
            if not gpu:
                self.fail("warp vote in CPU form", s)
            if s.mode not in n.VOTE_MODES:
                self.fail(f"unknown vote mode {s.mode!r}", s)
            self.same(self.expr(s.pred), BOOL, s, "vote predicate")
            self.integer(self.expr(s.mask), s)
            want = U32 if s.mode in ("ballot", "activemask") else I32
            self.same(self.lookup(s.dest, s), want, s, "vote result variable")
            if s.dest in self.lets:
                self.fail(f"let {s.dest!r} is assigned", s)
        elif isinstance(s, n.If):
            self.same(self.expr(s.cond), BOOL, s, "condition")
            self.scoped(s.then)
            self.scoped(s.orelse)
        elif isinstance(s, n.For):
            if s.kind not in n.FOR_KINDS:
                self.fail(f"unknown loop kind {s.kind!r}", s)
            if s.kind == "threads" and gpu:
                self.fail("thread loop in GPU form", s)
            if s.ordered and s.kind != "threads":
                self.fail("an ordered loop that is not a thread loop", s)
            for e in (s.start, s.stop, s.step):
                self.same(self.expr(e), s.vtype, s, "loop bound")
            self.scopes.append({})
            self.declare(s.var, s.vtype, s)
            self.loop_depth += 1
            self.for_vars.append(s.var)
            for inner in s.body:
                self.stmt(inner)
            self.for_vars.pop()
            self.loop_depth -= 1
            self.scopes.pop()
        elif isinstance(s, n.While):
            self.same(self.expr(s.cond), BOOL, s, "condition")
            self.loop_depth += 1
            self.scopes.append({})
            for inner in s.body:
                self.stmt(inner)
            # The update sees the body's scope in C's "for (;;update)": nothing declared in the
            # body is visible there, but the frontend never relies on it; keep the body scope.
            self.scoped(s.update)
            self.scopes.pop()
            self.loop_depth -= 1
        elif isinstance(s, (n.Break, n.Continue)):
            if self.loop_depth == 0:
                self.fail(f"{type(s).__name__.lower()} outside a loop", s)
        elif isinstance(s, n.Return):
            pass
        else:
            self.fail(f"unknown statement {type(s).__name__}", s)

    def access(self, buffer: str, index: tuple[n.Expr, ...], node: n.Node) -> ScalarType:
        info = self.buffers.get(buffer)
        if info is None:
            self.fail(f"unknown buffer {buffer!r}", node)
            raise AssertionError
        elem, rank, _space = info
        if len(index) != rank:
            self.fail(f"{buffer!r} takes {rank} index(es), got {len(index)}", node)
        for i in index:
            self.integer(self.expr(i), node)
        return elem

    def launch(self, s: n.Launch) -> None:
        if len(s.grid) != 3 or len(s.block) != 3:
            self.fail("launch needs three grid and three block extents", s)
        for e in s.grid + s.block:
            self.same(self.expr(e), U32, s, "grid or block extent")
        self.same(self.expr(s.shmem), U64, s, "dynamic shared memory size")
        if s.stream not in n.LAUNCH_STREAMS:
            self.fail(f"unknown launch stream {s.stream!r}", s)
        if len(s.pointers) != len(s.args):
            self.fail("launch needs one pointer entry per argument", s)
        for a, p in zip(s.args, s.pointers):
            t = self.expr(a)
            if p is None:
                continue
            if self.buffers.get(p, (None, 0, ""))[2] != "global" or self.kernel.param(p) is None:
                self.fail(f"launch argument points into {p!r}, which is no pointer parameter", s)
            if not t.is_int:
                self.fail("a pointer argument's offset must be an integer", s)

    def same(self, got: ScalarType, want: ScalarType, node: n.Node, what: str) -> None:
        if got != want:
            self.fail(f"{what} has type {got}, expected {want}", node)

    def integer(self, ty: ScalarType, node: n.Node) -> None:
        if not ty.is_int:
            self.fail(f"expected an integer, got {ty}", node)

    # -- expressions: returns the type, checking children
    def expr(self, e: n.Expr) -> ScalarType:
        if isinstance(e, n.Const):
            return e.ctype
        if isinstance(e, n.Var):
            declared = self.lookup(e.name, e)
            if declared != e.vtype:
                self.fail(f"{e.name!r} used as {e.vtype}, declared {declared}", e)
            return e.vtype
        if isinstance(e, n.ThreadIdx):
            if self.kernel.stage != "gpu":
                self.fail("threadIdx in CPU form", e)
            return U32
        if isinstance(e, n.GpuIndex):
            if e.dim not in (0, 1, 2):
                self.fail(f"bad dimension {e.dim}", e)
            return U32
        if isinstance(e, n.Load):
            elem = self.access(e.buffer, e.index, e)
            self.same(e.etype, elem, e, "load")
            return elem
        if isinstance(e, n.Unary):
            t = self.expr(e.x)
            if e.op == "not":
                self.same(t, BOOL, e, "operand of !")
            elif e.op == "bnot":
                self.integer(t, e)
            elif e.op == "neg":
                if t.is_bool:
                    self.fail("negation of bool", e)
            else:
                self.fail(f"unknown unary operator {e.op!r}", e)
            return e.type
        if isinstance(e, n.Binary):
            ta, tb = self.expr(e.a), self.expr(e.b)
            if e.op not in n.BINARY_OPS:
                self.fail(f"unknown binary operator {e.op!r}", e)
            if e.op in n.LOGIC_OPS:
                self.same(ta, BOOL, e, "operand of " + e.op)
                self.same(tb, BOOL, e, "operand of " + e.op)
            elif e.op in ("shl", "shr"):
                self.integer(ta, e)
                self.integer(tb, e)
            else:
                self.same(tb, ta, e, f"right operand of {e.op}")
                if e.op in n.BIT_OPS or e.op == "rem" and not ta.is_float:
                    if not (ta.is_int or (ta.is_bool and e.op in ("band", "bor", "bxor"))):
                        self.fail(f"{e.op} on {ta}", e)
                if e.op in n.ARITH_OPS and ta.is_bool:
                    self.fail(f"{e.op} on bool", e)
            return e.type
        if isinstance(e, n.Select):
            self.same(self.expr(e.cond), BOOL, e, "select condition")
            ta, tb = self.expr(e.a), self.expr(e.b)
            self.same(tb, ta, e, "select operand")
            return ta
        if isinstance(e, n.Cast):
            self.expr(e.x)
            return e.to
        if isinstance(e, n.Call) and e.fn == TEXTURE:
            problem = texture_signature_problem(tuple(self.expr(a) for a in e.args), e.rtype)
            if problem is not None:
                self.fail(problem, e)
            return e.rtype
        if isinstance(e, n.Call):
            fn = MATH_FUNCTIONS.get(e.fn)
            if fn is None:
                self.fail(f"unknown function {e.fn!r}", e)
                raise AssertionError
            if len(e.args) != fn.arity:
                self.fail(f"{e.fn} takes {fn.arity} argument(s)", e)
            types = [self.expr(a) for a in e.args]
            if fn.domain == "bits":
                if not is_bit_cast(types[0], e.rtype):
                    self.fail(f"bitcast from {types[0]} to {e.rtype} (needs the same size and the other kind)", e)
                return e.rtype
            for t in types[1:]:
                self.same(t, types[0], e, f"argument of {e.fn}")
            if fn.domain == "float" and not types[0].is_float:
                self.fail(f"{e.fn} on {types[0]}", e)
            if fn.domain == "int" and not types[0].is_int:
                self.fail(f"{e.fn} on {types[0]}", e)
            self.same(e.rtype, BOOL if fn.returns_bool else types[0], e, f"result of {e.fn}")
            return e.rtype
        self.fail(f"unknown expression {type(e).__name__}", e)
        raise AssertionError


def verify_kernel(kernel: n.Kernel) -> None:
    """Raise ``InternalError`` if ``kernel`` breaks an IR invariant."""
    _Verifier(kernel).run()


def verify_module(module: n.Module) -> None:
    names = set()
    for k in module.kernels:
        if k.name in names:
            raise InternalError(f"kernel {k.name!r} defined twice", k.loc)
        names.add(k.name)
        verify_kernel(k)
