"""Generic IR traversal: `Visitor` (read-only) and `Mutator` (rebuilds only what changed).

Dispatch is by node class: a subclass defines `visit_Load`, `visit_For`, ... and everything else
is walked field by field through the dataclass fields, so adding a node type needs no change
here.  The method for a node class is looked up once along its MRO and cached per functor class.
`Buffer`s are leaves: passes that retype a buffer map it explicitly (see `Mutator.buffer_map`).
"""
from __future__ import annotations

from dataclasses import fields, replace

from .buffer import Buffer
from .node import Node


def _field_names(cls) -> tuple:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in fields(cls) if f.name != "span")
        _FIELDS[cls] = names
    return names


_FIELDS: dict = {}


class _Dispatch:
    _cache: dict

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._cache = {}

    @classmethod
    def _method(cls, node_cls):
        m = cls._cache.get(node_cls)
        if m is None:
            for klass in node_cls.__mro__:
                m = getattr(cls, "visit_" + klass.__name__, None)
                if m is not None:
                    break
            else:
                m = cls.generic
            cls._cache[node_cls] = m
        return m


class Visitor(_Dispatch):
    _cache: dict = {}

    def visit(self, node):
        if isinstance(node, Node):
            return type(self)._method(type(node))(self, node)
        if isinstance(node, (tuple, list)):
            for x in node:
                self.visit(x)
        elif isinstance(node, dict):
            for x in node.values():
                self.visit(x)
        return None

    def visit_Buffer(self, node: Buffer):
        return None

    def generic(self, node):
        for name in _field_names(type(node)):
            v = getattr(node, name)
            if isinstance(v, (Node, tuple, list)):
                self.visit(v)
        return None


class Mutator(_Dispatch):
    """Returns the same object when nothing below a node changed (cheap identity checks)."""
    _cache: dict = {}

    def __init__(self, buffer_map: dict | None = None):
        self.buffer_map = buffer_map or {}

    def visit(self, node):
        if isinstance(node, Node):
            return type(self)._method(type(node))(self, node)
        if isinstance(node, tuple):
            items = [self.visit(x) for x in node]
            if all(a is b for a, b in zip(items, node)):
                return node
            return tuple(items)
        return node

    def visit_Buffer(self, node: Buffer):
        return self.buffer_map.get(node, node)

    def generic(self, node):
        changes = {}
        for name in _field_names(type(node)):
            v = getattr(node, name)
            if isinstance(v, (Node, tuple)):
                nv = self.visit(v)
                if nv is not v:
                    changes[name] = nv
        if not changes:
            return node
        return replace(node, **changes)


def collect(node, predicate) -> list:
    """All nodes under `node` (pre-order) for which `predicate(n)` is true.

    What a `Visitor` whose `generic` tests each node would find (Buffers are leaves, tuples, lists
    and dicts are walked, a node's non-node fields are not), written as one recursive function: the
    passes call it ~100 times per kernel, and the Visitor subclass it used to make per call started
    with an empty dispatch cache every time (lowering 160 fuzzed programs for the CPU, sm_80 and
    sm_90a: 5.8-6.1 CPU-s with it, 3.3-3.6 now; tests/ir/test_ir.py checks both find the same)."""
    found: list = []
    _collect(node, predicate, found)
    return found


_WALKED = (Node, tuple, list)


def _collect(node, predicate, found: list) -> None:
    if isinstance(node, Node):
        if predicate(node):
            found.append(node)
        if isinstance(node, Buffer):
            return
        names = _FIELDS.get(type(node))
        if names is None:
            names = _field_names(type(node))
        for name in names:
            v = getattr(node, name)
            if isinstance(v, _WALKED):
                _collect(v, predicate, found)
    elif isinstance(node, (tuple, list)):
        for x in node:
            if isinstance(x, _WALKED) or isinstance(x, dict):
                _collect(x, predicate, found)
    elif isinstance(node, dict):
        for x in node.values():
            _collect(x, predicate, found)


def substitute(node, mapping: dict):
    """Replace Vars (by identity) with expressions throughout `node`."""
    if not mapping:
        return node

    class _S(Mutator):
        def visit_Var(self, v):
            return mapping.get(v, v)

    return _S().visit(node)
