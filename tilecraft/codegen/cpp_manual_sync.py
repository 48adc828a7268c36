"""CPU emitters of the mbarriers a program drives itself (ir/hopper.py, lowered by
transform/lower_manual_sync_cpu.py), and the entry's failure protocol for their waits.

A wait that the CPU's program order cannot satisfy records its site number (tilecraft_cpu.h,
`tc::cpu_mbar_wait`); the entry returns that number and exports `tc_error_text(site)`, the message
naming the user's file and line, which the runtime raises (runtime/kernel.py)."""
from __future__ import annotations

from ..ir import collect
from ..ir import intrinsics as I


def _c_string(text: str) -> str:
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{out}"'


def _ref(p, ref) -> str:
    return p.visit_Ref(ref)


@I.register_emitter(I.MbarInit, "cpu")
def _init(p, call) -> str:
    bar, count = call.args
    return f"tc::cpu_mbar_init({_ref(p, bar)}, {p.expr(count)})"


@I.register_emitter(I.CpuMbarArrive, "cpu")
def _arrive(p, call) -> str:
    bar, count = call.args
    return f"tc::cpu_mbar_arrive({_ref(p, bar)}, {p.expr(count)})"


@I.register_emitter(I.CpuMbarWait, "cpu")
def _wait(p, call) -> str:
    bar, parity = call.args
    return f"tc::cpu_mbar_wait({_ref(p, bar)}, (int)({p.expr(parity)}), {call.intrinsic.site})"


def wait_sites(func) -> list:
    return sorted({c.intrinsic for c in collect(func.body, lambda n: isinstance(n, I.IntrinsicCall)
                                                and isinstance(n.intrinsic, I.CpuMbarWait))},
                  key=lambda w: w.site)


def entry_prologue(p, func) -> None:
    if wait_sites(func):
        p.doc.line("tc::cpu_mbar_failed() = 0;")


def entry_epilogue(func) -> str:
    return "tc::cpu_mbar_failed()" if wait_sites(func) else "0"


def error_text_function(p, func, asserts: bool = False) -> None:
    """`tc_error_text(rc)`: the message for the entry's failure code -- a wait's site number, or -1
    for a false T.device_assert (its text, codegen/cpp.py)."""
    sites = wait_sites(func)
    if not sites and not asserts:
        return
    d = p.doc
    d.line("")
    d.line('extern "C" const char* tc_error_text(int tc_site) {')
    d.indent()
    d.line("switch (tc_site) {")
    if asserts:
        d.line("  case -1: return tc::cpu_assert_text();")
    for w in sites:
        d.line(f"  case {w.site}: return {_c_string(w.where)};")
    d.line("}")
    d.line("return \"\";")
    d.dedent()
    d.line("}")
