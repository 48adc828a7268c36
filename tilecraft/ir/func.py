"""`PrimFunc`: one kernel program — its parameters (global buffers), body, source and lowering state.

Compile options are not part of it: they reach the passes in their `PassContext` (transform/pipeline.py)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .lowering import LoweringState
from .node import Node
from .stmt import Stmt


@dataclass(frozen=True, eq=False)
class PrimFunc(Node):
    name: str
    params: tuple          # Buffers of scope "global", in signature order
    body: Stmt
    source: str = ""       # the user's Python source of the function (for cache keys)
    symbols: tuple = ()    # symbolic dimension Vars, in first-appearance order
    imports: tuple = ()    # source texts the program pastes in (T.import_source), in program order
    lowering: LoweringState = field(default_factory=LoweringState)  # the passes' decisions (ir/lowering.py)
    workspaces: int = 0    # the last `workspaces` params are T.alloc_global scratch tensors (allocated per call)
    # scalar parameters (`n: T.int32`), passed by value: (position in the signature, its Var); each
    # Var is also one of `symbols` (the launchers pass symbols by value), never a tensor's size
    scalars: tuple = ()

    @property
    def declared_params(self) -> tuple:
        """The parameters the caller sees (without the T.alloc_global workspaces)."""
        return self.params[:len(self.params) - self.workspaces]

    def with_lowering(self, **changes) -> "PrimFunc":
        """This function with the given fields of its lowering state replaced."""
        return replace(self, lowering=self.lowering.update(**changes))

    def with_body(self, body: Stmt) -> "PrimFunc":
        return self if body is self.body else replace(self, body=body)

    def script(self) -> str:
        from .printer import to_text
        return to_text(self)
