"""One registry type for every table that maps a class (or a class and a target) to its handler.

The lowerings of tile ops, the emitters of intrinsics and the builders of pipelined loop forms are
each a table keyed by class.  `Registry` is that table: registering a key twice is an error naming
both handlers (two modules claiming one op is a bug, never a silent override), and a lookup of a
missing key is an error naming the table, so no table grows a hand-rolled `register` of its own.
"""
from __future__ import annotations

from typing import Callable, Iterator


class RegistryError(Exception):
    """A duplicate registration or a missing handler: a compiler bug, not a user mistake."""


def _name(key) -> str:
    if isinstance(key, tuple):
        return "(" + ", ".join(_name(k) for k in key) + ")"
    return getattr(key, "__name__", repr(key))


class Registry:
    """`what`: what the table holds, for its messages ("CPU lowering", "loop form builder")."""

    def __init__(self, what: str):
        self.what = what
        self._table: dict = {}

    def register(self, key) -> Callable:
        """Decorator: `fn` handles `key` (a class, or a tuple such as (class, target))."""
        def deco(fn):
            self.add(key, fn)
            return fn
        return deco

    def add(self, key, fn) -> None:
        old = self._table.get(key)
        if old is not None:
            raise RegistryError(f"a {self.what} for {_name(key)} is already registered "
                                f"({getattr(old, '__module__', '?')}.{getattr(old, '__name__', old)!s})")
        self._table[key] = fn

    def get(self, key, default=None):
        return self._table.get(key, default)

    def lookup(self, key):
        """The handler of `key`; a missing one is a RegistryError naming the table."""
        fn = self._table.get(key)
        if fn is None:
            raise RegistryError(f"no {self.what} is registered for {_name(key)}")
        return fn

    def __getitem__(self, key):
        return self.lookup(key)

    def __contains__(self, key) -> bool:
        return key in self._table

    def __iter__(self) -> Iterator:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def items(self):
        return self._table.items()

    def keys(self):
        return self._table.keys()
