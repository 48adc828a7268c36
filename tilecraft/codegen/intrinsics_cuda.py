"""CUDA emitters of the typed intrinsics (tilecraft/ir/intrinsics): one per intrinsic class.

Every intrinsic prints as a call of its header entry point, `entry<template args>(args)`; the
template arguments are its parameters in the header's order, spelled for C++ here (bools as
true/false, element types by their header names, combiners by their functor types).  Intrinsics
whose spelling departs from that register their own emitter below."""
from __future__ import annotations

from ..ir import intrinsics as I
from ..ir.dtype import DType
from .c_printer import C_TYPES

TARGET = "cuda"
_COMBINER = {"sum": "tc::SumOp", "max": "tc::MaxOp", "min": "tc::MinOp", "bitand": "tc::BitAndOp",
             "bitor": "tc::BitOrOp", "bitxor": "tc::BitXorOp"}


def template_arg(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, DType):
        # as CudaPrinter.type_name: NVRTC has no <cstdint>, the header defines tc::int8_t and co.
        if v.is_int and v.bits != 32:
            return f"tc::{v.kind}{v.bits}_t"
        return C_TYPES[v.name]
    if isinstance(v, tuple):
        return ", ".join(template_arg(x) for x in v)
    return str(v)


def template_call(intr: I.Intrinsic, targs, args) -> str:
    t = ", ".join(targs)
    return f"{intr.entry}<{t}>({', '.join(args)})" if targs else f"{intr.entry}({', '.join(args)})"


def args_of(printer, call) -> list:
    return [printer.expr(a) for a in call.args]


def _generic(printer, call):
    intr = call.intrinsic
    return template_call(intr, [template_arg(v) for _, v in intr.params()], args_of(printer, call))


@I.register_emitter(I.ShflXorReduce, TARGET)
def _shfl_xor_reduce(printer, call):
    r = call.intrinsic
    return template_call(r, [_COMBINER[r.op], template_arg(r.lane_masks)], args_of(printer, call))


@I.register_emitter(I.BulkCommit, TARGET)
@I.register_emitter(I.BulkWaitRead, TARGET)
def _bulk_group(printer, call):   # the tile operand is for the passes (what the group reads), not the header
    return f"{call.intrinsic.entry}()"


@I.register_emitter(I.DeviceAssert, TARGET)
def _device_assert(printer, call):
    return f"{call.intrinsic.entry}({printer.expr(call.args[0])}, {printer.expr(call.intrinsic.where)})"


@I.register_emitter(I.IketEvent, TARGET)
def _iket_event(printer, call):
    """One row per warp in the launch's trace log (device/include/tilecraft/iket.h), with the
    lowest active lane's payload: an integer as is, a float through double."""
    e = call.intrinsic
    kind = I.IKET_KINDS[e.kind]
    if not call.args:
        return f"TL_IKET_EVENT({kind}, {e.event_id})"
    which = "FLOAT" if e.payload_dtype.startswith(("float", "bfloat")) else "INT"
    return f"TL_IKET_EVENT_PAYLOAD_{which}({kind}, {e.event_id}, {printer.expr(call.args[0])})"


@I.register_emitter(I.WarpVote, TARGET)
def _vote(printer, call):
    return f"{call.intrinsic.entry}_{call.intrinsic.kind}({', '.join(args_of(printer, call))})"


@I.register_emitter(I.Shfl, TARGET)
def _shfl(printer, call):
    return f"{call.intrinsic.entry}_{call.intrinsic.kind}({', '.join(args_of(printer, call))})"


@I.register_emitter(I.Extern, TARGET)
def _extern(printer, call):  # the program's own function: its name, no template arguments
    return f"{call.intrinsic.name}({', '.join(args_of(printer, call))})"


@I.register_emitter(I.PrintElem, TARGET)
def _print_elem(printer, call):
    msg, value, *coords = args_of(printer, call)
    flat = coords[0] if coords else "0"
    for c, n in zip(coords[1:], call.intrinsic.shape[1:]):
        flat = f"({flat}) * {n} + ({c})"
    return f"{call.intrinsic.entry}({msg}, {msg}, (long long)({flat}), {value})"


def _rng(printer, call):  # the kernel's generator `tc_rng` (codegen/cuda.py declares it) comes first
    return f"{call.intrinsic.entry}({', '.join(['tc_rng'] + args_of(printer, call))})"


for _cls in I.RNG:
    I.register_emitter(_cls, TARGET)(_rng)

for _cls in I.all_intrinsics():
    if (_cls, TARGET) not in I.EMITTERS:
        I.register_emitter(_cls, TARGET)(_generic)
