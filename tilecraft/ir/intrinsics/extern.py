"""A function the program brings itself: `T.call_extern(dtype, name, *args)` (its body pasted in with
`T.import_source`, or one the toolchain knows).

The compiler cannot see inside it, so its declaration is the program's word: each pointer argument
(`T.access_ptr(buf, "r" | "w" | "rw")`) is read, written or both, as its access mode says; every
other argument is a value.  The passes order memory around it from those declarations like any
other intrinsic (insert_syncs: a write to a shared tile is followed by a barrier before another
thread reads it)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import PTR, READ, READ_WRITE, VALUE, WRITE, Intrinsic, Operand, require

ACCESS_MODES = {"r": READ, "w": WRITE, "rw": READ_WRITE}


@dataclass(frozen=True)
class Extern(Intrinsic):
    """`name(args...)`; `accesses[i]` is READ / WRITE / READ_WRITE for a pointer argument, "" for a value.
    The one intrinsic that is not a header entry point: its emitters print `name`."""
    entry = "extern"
    family = "extern"
    name: str
    accesses: tuple

    def check(self):
        require(self.name.isidentifier() or all(p.isidentifier() for p in self.name.split("::")), self.name,
                "an extern function's name is a C++ identifier (optionally qualified with ::)")
        require(all(a in ("", READ, WRITE, READ_WRITE) for a in self.accesses), self.name,
                "each argument is a value or a pointer read, written or both")

    def operand(self, i: int) -> Operand | None:
        if i >= len(self.accesses):
            return None
        acc = self.accesses[i]
        return Operand(f"arg{i}", PTR, acc) if acc else Operand(f"arg{i}", VALUE)

    def describe(self) -> str:
        return f"extern {self.name}"
