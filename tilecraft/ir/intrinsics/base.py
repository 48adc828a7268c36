"""Typed intrinsics: one frozen class per device entry point of the header library.

A lowered device call is an `IntrinsicCall(intrinsic, args)`.  The intrinsic is data: its
template parameters are dataclass fields, checked in Python against the header's contract when
the object is built (a bad parameter is a compiler bug, caught here before NVRTC sees it); its
class declares the operands (`Operand`: what each argument is and which memory it reads or
writes) and the effects (`Effects`: which async proxy, which barrier it arrives on or waits for,
whether a software pipeline orders its memory effects).  Passes reason from these declarations
(insert_syncs, legalize_global_access), never from names; the printers print an intrinsic only
through the emitter registered for (intrinsic class, target kind) in `EMITTERS`.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable, ClassVar

from ...registry import Registry
from .. import dtype as dt
from ..dtype import DType
from ..expr import Expr

# operand kinds
PTR = "ptr"          # a Ref: the address of an element (memory the call reads or writes)
VALUE = "value"      # a scalar expression
BARRIER = "barrier"  # a Ref to an mbarrier word (a synchronisation object, not data)
DESC = "desc"        # a TMA tensor-map pointer (kernel parameter)
HOOK = "hook"        # another intrinsic's object, called by this one (a gemm's pipeline hook)
PRED = "pred"        # a bool: the access happens (or reads zeros) when false; added by legalize_global_access
MSG = "msg"          # a string literal

# memory accesses of a PTR operand
READ, WRITE, READ_WRITE, ATOMIC = "read", "write", "read_write", "atomic"

# the path a call's memory accesses take (Effects.proxy)
GENERIC_PROXY, CP_ASYNC, TMA, WGMMA = "generic", "cp.async", "tma", "wgmma"
# what a call waits for (Effects.waits)
CP_ASYNC_GROUPS, WGMMA_GROUPS, MBARRIER_PHASE = "cp.async groups", "wgmma groups", "mbarrier phase"


class IntrinsicError(ValueError):
    """A lowering built an intrinsic that violates its header's contract (a compiler bug)."""


@dataclass(frozen=True)
class Operand:
    name: str
    kind: str = PTR
    access: str = ""            # for PTR: READ / WRITE / READ_WRITE / ATOMIC
    spaces: tuple = ()          # memory spaces a PTR may point into ("global", "shared", "local"); () = any
    optional: bool = False      # may be absent (a trailing default argument)


@dataclass(frozen=True)
class Effects:
    """What a call does beyond its operands' reads and writes.

    proxy: the path its memory accesses take — GENERIC_PROXY (ordinary loads/stores), CP_ASYNC
      (asynchronous copies, complete at a group wait or an mbarrier arrival), TMA (the async
      proxy's bulk tensor copies, complete on an mbarrier), WGMMA (tensor cores reading shared
      memory through the async proxy).
    pipeline_ordered: its memory effects are ordered by the software pipeline that issued it (its
      own waits, mbarriers and barriers, transform/pipeline_copies.py): insert_syncs leaves its
      operands out.
    commits: the asynchronous group it closes (CP_ASYNC, WGMMA), "" for none.
    waits: what it waits for — CP_ASYNC_GROUPS, WGMMA_GROUPS (down to its `pending` parameter
      when it has one, else all), MBARRIER_PHASE (of its `barrier` operand).
    arrives: it arrives on its `barrier` operand (an mbarrier phase counts that arrival; with
      TMA or cp.async the arrival comes when its bytes land).
    barrier: the name of the BARRIER operand it arrives on or waits on ("" for none).
    zfill: a predicated global read — out-of-range elements are read as zeros through a trailing
      PRED operand (legalize_global_access supplies it) instead of the call being skipped.
    block_barrier: it synchronises the whole block itself (a __syncthreads inside).
    fences: the proxies it orders (e.g. "generic -> async (shared)").
    note: which barrier of a ring, and any other detail, for people.
    """
    proxy: str = GENERIC_PROXY
    pipeline_ordered: bool = False
    commits: str = ""
    waits: str = ""
    arrives: bool = False
    barrier: str = ""
    zfill: bool = False
    block_barrier: bool = False
    fences: str = ""
    note: str = ""


GENERIC = Effects()


@dataclass(frozen=True)
class Intrinsic:
    """Base of every intrinsic.  Subclasses set `entry` (the header's C++ name), `operands`,
    `effects`, and declare template parameters as fields (in the header's template order)."""
    entry: ClassVar[str] = ""
    family: ClassVar[str] = ""
    operands: ClassVar[tuple] = ()
    effects: ClassVar[Effects] = GENERIC
    thread_level: ClassVar[bool] = False   # lanes exchange registers: the CPU target emulates the threads

    def __post_init__(self):
        self.check()

    def check(self):
        """Raise IntrinsicError when a parameter breaks the header's contract."""

    def params(self) -> tuple:
        """(name, value) of the template parameters, in the header's order."""
        return tuple((f.name, getattr(self, f.name)) for f in fields(self))

    def operand(self, i: int) -> Operand | None:
        return self.operands[i] if i < len(self.operands) else None

    def describe(self) -> str:
        """`gemm_ss<M=128, ...>` for the IR printer."""
        ps = ", ".join(f"{k}={v}" for k, v in self.params())
        short = self.entry.split("::")[-1]
        return f"{short}<{ps}>" if ps else short


def require(ok: bool, intr: Intrinsic | str, what: str):
    if not ok:
        name = intr if isinstance(intr, str) else intr.entry
        raise IntrinsicError(f"{name}: {what} (got {intr})")


@dataclass(frozen=True, eq=False)
class IntrinsicCall(Expr):
    """A call of a typed device intrinsic (as an expression: most are statements via Evaluate)."""
    intrinsic: Intrinsic
    args: tuple
    type: DType = dt.int32

    @property
    def dtype(self) -> DType:
        return self.type

    def operand_args(self):
        """(Operand declaration or None, argument) pairs."""
        return [(self.intrinsic.operand(i), a) for i, a in enumerate(self.args)]

    def arg(self, name: str):
        """The argument of the operand declared as `name` (None when absent)."""
        for decl, a in self.operand_args():
            if decl is not None and decl.name == name:
                return a
        return None

    def barrier(self):
        """The mbarrier argument this call arrives on or waits on, or None."""
        b = self.intrinsic.effects.barrier
        return self.arg(b) if b else None


# ---- emitters: one per (intrinsic class, target kind), duplicates refused ----------------------

EMITTERS = Registry("emitter")   # (intrinsic class, target kind) -> fn(printer, call) -> str


def register_emitter(cls: type, target: str) -> Callable:
    """Decorator: `fn(printer, call: IntrinsicCall) -> str` prints calls of `cls` on `target`."""
    return EMITTERS.register((cls, target))


def emitter(intr: Intrinsic, target: str):
    fn = EMITTERS.get((type(intr), target))
    if fn is None:
        raise IntrinsicError(f"intrinsic {intr.entry} ({type(intr).__name__}) has no emitter for {target}")
    return fn
