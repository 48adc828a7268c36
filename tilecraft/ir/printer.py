"""A readable, Python-like rendering of the IR, for debugging (`kernel.get_ir()`) and tests."""
from __future__ import annotations

from . import expr as E
from . import stmt as S
from . import tileop as O
from .buffer import Buffer, Region
from .func import PrimFunc
from .functor import _Dispatch

_PREC = {"or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4, "|": 5, "^": 6,
         "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10}


class Printer(_Dispatch):
    _cache: dict = {}

    def __init__(self):
        self.lines: list[str] = []
        self.indent = 0

    # ---- expressions ---------------------------------------------------------------------
    def expr(self, e) -> str:
        if isinstance(e, E.Expr):
            return type(self)._method(type(e))(self, e)
        if isinstance(e, Buffer):
            return e.name
        if isinstance(e, Region):
            return self.region(e)
        if isinstance(e, E.Node):
            return f"<{type(e).__name__}>"
        return repr(e)

    def visit_Const(self, e):
        if e.dtype.is_float:
            return repr(e.value) if e.dtype.bits == 32 else f"{e.dtype}({e.value!r})"
        return str(e.value)

    def visit_Var(self, e):
        return e.name

    def visit_Binary(self, e):
        if e.op in ("min", "max"):
            return f"T.{e.op}({self.expr(e.a)}, {self.expr(e.b)})"
        p = _PREC[e.op]

        def side(x, right):
            s = self.expr(x)
            if isinstance(x, E.Binary) and x.op in _PREC and (_PREC[x.op] < p or (right and _PREC[x.op] == p)):
                return f"({s})"
            return s
        return f"{side(e.a, False)} {e.op} {side(e.b, True)}"

    def visit_Unary(self, e):
        op = {"neg": "-", "not": "not ", "bitnot": "~"}[e.op]
        inner = self.expr(e.a)
        return f"{op}({inner})" if isinstance(e.a, E.Binary) else f"{op}{inner}"

    def visit_Call(self, e):
        return f"T.{e.op}({', '.join(self.expr(a) for a in e.args)})"

    def visit_IntrinsicCall(self, e):
        return f"tc.{e.intrinsic.describe()}({', '.join(self.expr(a) for a in e.args)})"

    def visit_Cast(self, e):
        return f"T.cast({self.expr(e.value)}, \"{e.dtype}\")"

    def visit_Select(self, e):
        return f"T.if_then_else({self.expr(e.cond)}, {self.expr(e.a)}, {self.expr(e.b)})"

    def visit_Load(self, e):
        return f"{e.buffer.name}[{', '.join(self.expr(i) for i in e.indices)}]"

    def visit_Ref(self, e):
        return f"T.address_of({self.visit_Load(e)})"

    def region(self, r: Region) -> str:
        if r.covers_whole():
            return r.buffer.name
        parts = []
        for s, n in zip(r.starts, r.extents):
            parts.append(self.expr(s) if n == 1 else f"{self.expr(s)}:{self.expr(s)} + {n}"
                         if not E.is_const(s) else f"{s.value}:{s.value + n}")
        return f"{r.buffer.name}[{', '.join(parts)}]"

    # ---- statements ----------------------------------------------------------------------
    def emit(self, text: str):
        self.lines.append("    " * self.indent + text)

    def stmt(self, s):
        if s is None:
            return
        type(self)._method(type(s))(self, s)

    def generic(self, node):
        self.emit(f"<{type(node).__name__}>")

    def visit_Seq(self, s):
        for x in s.stmts:
            self.stmt(x)

    def visit_Store(self, s):
        self.emit(f"{s.buffer.name}[{', '.join(self.expr(i) for i in s.indices)}] = {self.expr(s.value)}")

    def visit_Let(self, s):
        self.emit(f"{s.var.name}: {s.var.dtype} = {self.expr(s.value)}")

    def visit_For(self, s):
        kind = {"serial": "T.serial", "unroll": "T.unroll", "parallel": "T.Parallel",
                "pipelined": "T.Pipelined", "vectorized": "T.vectorized"}[s.kind]
        extra = "".join(f", {k}={v}" for k, v in s.annotations)
        start = "" if E.is_const(s.start, 0) else f"{self.expr(s.start)}, "
        self.emit(f"for {s.var.name} in {kind}({start}{self.expr(s.extent)}{extra}):")
        self.indent += 1
        if s.plan is not None:
            self.emit(f"# plan: {s.plan.describe()}")
        self.stmt(s.body)
        self.indent -= 1

    def visit_While(self, s):
        self.emit(f"while {self.expr(s.cond)}:")
        self.indent += 1
        self.stmt(s.body)
        self.indent -= 1

    def visit_If(self, s):
        self.emit(f"if {self.expr(s.cond)}:")
        self.indent += 1
        self.stmt(s.then)
        self.indent -= 1
        if s.orelse is not None:
            self.emit("else:")
            self.indent += 1
            self.stmt(s.orelse)
            self.indent -= 1

    def visit_Alloc(self, s):
        b = s.buffer
        fn = {"shared": "alloc_shared", "fragment": "alloc_fragment", "local": "alloc_local",
              "var": "alloc_var"}.get(b.scope, "alloc")
        init = f", init={self.expr(s.init)}" if s.init is not None else ""
        self.emit(f"{b.name} = T.{fn}({tuple(b.shape)}, \"{b.dtype}\"{init})")

    def visit_Break(self, s):
        self.emit("break")

    def visit_View(self, s):
        if not hasattr(s.base, "name") or not hasattr(s.base, "shape"):
            self.emit(f"{s.buffer.name} = T.make_tensor({self.expr(s.base)}, {tuple(s.buffer.shape)}, \"{s.buffer.dtype}\")")
            return
        self.emit(f"{s.buffer.name} = T.Tensor({tuple(s.buffer.shape)}, \"{s.buffer.dtype}\", {s.base.name}.data)")

    def visit_Annotate(self, s):
        self.emit(f"T.annotate({s.key!r}, {s.value!r})")

    def visit_Kernel(self, s):
        grid = ", ".join(self.expr(g) for g in s.grid)
        names = ", ".join(v.name for v in s.block_vars)
        if s.cluster:
            self.emit(f"with T.ClusterKernel({grid}, threads={list(s.threads)}, cluster_dims={list(s.cluster)}) "
                      f"as ({names}):")
        else:
            self.emit(f"with T.Kernel({grid}, threads={list(s.threads)}) as ({names}):")
        self.indent += 1
        self.stmt(s.body)
        self.indent -= 1

    def visit_Evaluate(self, s):
        self.emit(self.expr(s.value))

    def visit_WarpSpecialize(self, s):
        regs = f", registers {s.producer_regs} / {s.consumer_regs}" if s.consumer_regs else ""
        regs += f", {s.blocks_per_sm} blocks per SM" if s.blocks_per_sm > 1 else ""
        self.emit(f"with T.warp_specialize(consumer_threads={s.consumer_threads}{regs}):")
        self.indent += 1
        for role, body in (("producer", s.producer), ("consumer", s.consumer)):
            self.emit(f"with {role}:")
            self.indent += 1
            self.stmt(body)
            self.indent -= 1
        self.indent -= 1

    def visit_Sync(self, s):
        self.emit("T.sync_threads()")

    # ---- manual Hopper constructs (ir/hopper.py) -----------------------------------------
    def visit_WarpGroupScope(self, s):
        lanes = f", threads [{s.lanes[0]}, {s.lanes[1]})" if s.lanes else ""
        self.emit(f"with T.ws({', '.join(map(str, s.groups))}){lanes}:")
        self.indent += 1
        self.stmt(s.body)
        self.indent -= 1

    def visit_BarrierInit(self, s):
        self.emit(f"T.barrier_init({s.buffer.name}, arrive_counts={list(s.counts)})")

    def visit_BarrierArrive(self, s):
        if s.cta is not None:
            self.emit(f"T.mbarrier_arrive({self.expr(s.barrier)}, {self.expr(s.cta)})")
        else:
            self.emit(f"T.barrier_arrive({self.expr(s.barrier)})")

    def visit_MmaCommitArrive(self, s):
        self.emit(f"T.tcgen05_mma_arrive({self.expr(s.barrier)})")

    def visit_BarrierWait(self, s):  # the line is part of the kernel: a CPU wait that fails names it
        at = f", at={s.span.short()!r}" if s.span is not None else ""
        self.emit(f"T.barrier_wait({self.expr(s.barrier)}, {self.expr(s.parity)}{at})")

    def visit_SetMaxNreg(self, s):
        self.emit(f"T.set_max_nreg({s.regs}, {int(s.inc)})")

    # ---- tile ops ------------------------------------------------------------------------
    def visit_Copy(self, s):
        self.emit(f"T.copy({self.region(s.src)}, {self.region(s.dst)})")

    def visit_Gemm(self, s):
        flags = "".join([", transpose_A=True" if s.trans_a else "", ", transpose_B=True" if s.trans_b else "",
                         f", policy={s.policy}" if s.policy != "Square" else "",
                         ", clear_accum=True" if s.clear_accum else "",
                         f", pipeline_hook={self.expr(s.pipeline_hook)}" if s.pipeline_hook is not None else "",
                         f", async_groups={s.async_groups}" if s.async_groups else "",
                         ", tma_fed=True" if s.tma_fed else "",
                         f", plan={s.plan.describe()!r}" if s.plan is not None else ""])
        self.emit(f"T.gemm({self.region(s.a)}, {self.region(s.b)}, {self.region(s.c)}{flags})")

    def visit_Fill(self, s):
        self.emit(f"T.fill({self.region(s.dst)}, {self.expr(s.value)})")

    def visit_Reduce(self, s):
        self.emit(f"T.reduce_{s.kind}({s.src.name}, {s.dst.name}, dim={s.dim}, clear={s.clear})")

    def visit_AtomicAdd(self, s):
        self.emit(f"T.atomic_{s.kind}({self.region(s.dst)}, {self.expr(s.value)})")

    def visit_Cumsum(self, s):
        self.emit(f"T.cumsum({s.src.name}, {s.dst.name}, dim={s.dim}, reverse={s.reverse})")

    def visit_Print(self, s):
        self.emit(f"T.print({self.expr(s.value)}, msg={s.msg!r})")

    def visit_PrimFunc(self, f: PrimFunc):
        params = [f"{b.name}: T.Tensor({tuple(self.expr(d) if isinstance(d, E.Expr) else d for d in b.shape)}, \"{b.dtype}\")"
                  for b in f.params]
        for pos, v in f.scalars:   # scalar parameters, at their places in the signature
            params.insert(pos, f"{v.name}: T.{v.dtype}")
        params = ", ".join(params)
        self.emit("@T.prim_func")
        self.emit(f"def {f.name}({params}):")
        self.indent += 1
        for text in f.imports:  # in full: the printed program is the compile cache's key
            self.emit(f"T.import_source({text!r})")
        self.stmt(f.body)
        self.indent -= 1
        lines = f.lowering.describe()
        if lines:
            self.emit("# lowering state (ir/lowering.py):")
            for line in lines:
                self.emit(f"#   {line}")


def to_text(node) -> str:
    p = Printer()
    if isinstance(node, (E.Expr, Buffer, Region)):
        return p.expr(node)
    if isinstance(node, PrimFunc):
        p.visit_PrimFunc(node)
    else:
        p.stmt(node)
    return "\n".join(p.lines)


def _source_repr(node) -> str:
    """An IR value as the source text it stands for (`bx * 64 + i`), so messages that show one
    (`got {x!r}`) read like the user's program, never like `Binary(op='*', a=Var(...`."""
    try:
        return to_text(node)
    except Exception:  # noqa: BLE001 - a half-built node: the generic form
        return object.__repr__(node)


def use_source_reprs(*roots) -> None:
    """Give every class under `roots` (and their subclasses, recursively) the source-text repr."""
    seen, todo = set(), list(roots)
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        cls.__repr__ = _source_repr
        todo.extend(cls.__subclasses__())
