"""``set_autotune_inputs``: tune on the caller's own tensors instead of synthesized ones.

Works as a plain call (the inputs stay in force until changed) and as a context manager (the
previous inputs come back on exit)::

    with set_autotune_inputs(a, b):
        best = tuned_matmul(M, N, K)

The tensors are the kernel's inputs, i.e. the arguments ``kernel(*inputs)`` takes (outputs
named by ``out_idx`` are not passed). The setting lives in a ``ContextVar``, so threads and
asyncio tasks do not see each other's inputs.
"""

from __future__ import annotations

import contextvars
from typing import Any

__all__ = ["set_autotune_inputs", "current_autotune_inputs"]

_INPUTS: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("tilecraft_autotune_inputs", default=None)


class set_autotune_inputs:  # noqa: N801 - TileLang's name, used as a function and a context manager
    """Make ``tensors`` the inputs of the next tuning runs (until reset or the ``with`` block ends)."""

    def __init__(self, *tensors: Any):
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            tensors = tuple(tensors[0])
        self.inputs = tensors
        self._token = _INPUTS.set(tensors)

    def __enter__(self) -> "set_autotune_inputs":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            _INPUTS.reset(self._token)
        except ValueError:  # exited in another context than the one that set it
            _INPUTS.set(None)

    @staticmethod
    def clear() -> None:
        """Go back to synthesized inputs."""
        _INPUTS.set(None)


def current_autotune_inputs() -> tuple | None:
    """The tensors set by ``set_autotune_inputs``, or None."""
    return _INPUTS.get()
