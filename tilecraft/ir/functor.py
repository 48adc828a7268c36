"""Generic IR traversal: `Visitor` (read-only) and `Mutator` (rebuilds only what changed).

Dispatch is by node class: a subclass defines `visit_Load`, `visit_For`, ... and everything else
is walked field by field through the dataclass fields, so adding a node type needs no change
here.  The method for a node class is looked up once along its MRO and cached per functor class.
`Buffer`s are leaves: passes that retype a buffer map it explicitly (see `Mutator.buffer_map`).
"""
from __future__ import annotations

import threading
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
    """Method lookup, and which subtrees a functor may pass over: a subtree all of whose node
    classes this functor has already met and found without a method of their own (only the
    field-by-field walk) is returned as it is, unwalked (`_wanted` against `class_mask`)."""
    _cache: dict
    _walks_all = True   # its own `visit` or `generic`: every node is walked
    _wanted: int = -1   # ~(bits of the classes met here that have no method of their own)
    _walker = None

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._cache = {}
        cls._wanted = -1
        base = cls._walker   # Visitor or Mutator (set below them), None for other functors
        cls._walks_all = base is None or cls.visit is not base.visit or cls.generic is not base.generic

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
            if not cls._walks_all and (m is cls.generic or m is Mutator.visit_Buffer or m is Visitor.visit_Buffer):
                cls._wanted &= ~(_BUFFER_BIT if issubclass(node_cls, Buffer) else _bit(node_cls))
        return m


_BIT: dict = {}        # node class -> its bit in `class_mask`
_BIT_LOCK = threading.Lock()
_MASK = "_tc_classes"  # a node's cached class mask


def _bit(cls) -> int:
    b = _BIT.get(cls)
    if b is None:
        with _BIT_LOCK:   # two classes must never share a bit (the autotuner lowers in threads)
            b = _BIT.get(cls)
            if b is None:
                b = _BIT[cls] = 1 << len(_BIT)
    return b


def class_mask(node) -> int:
    """The classes of the nodes in `node`'s subtree (itself included; walked as `collect` walks,
    Buffers are leaves) as bits (`_bit`); -1 when a list or dict is reached (a builder could still
    change one).  Nodes are frozen: kept on the node."""
    m = node.__dict__.get(_MASK)
    if m is not None:
        return m
    if isinstance(node, Buffer):
        m = _BUFFER_BIT
    else:
        m = _BIT.get(type(node)) or _bit(type(node))
        for name in _field_names(type(node)):
            v = getattr(node, name)
            if isinstance(v, Node):
                m |= class_mask(v)
            elif isinstance(v, _SEQ):
                m |= _seq_mask(v)
    node.__dict__[_MASK] = m
    return m


def _seq_mask(v) -> int:
    if type(v) is not tuple:
        return -1
    m = 0
    for x in v:
        if isinstance(x, Node):
            m |= class_mask(x)
        elif isinstance(x, tuple):
            m |= _seq_mask(x)
        elif isinstance(x, (list, dict)):
            return -1
    return m


class Visitor(_Dispatch):
    _cache: dict = {}

    def visit(self, node):
        if isinstance(node, Node):
            cls = type(self)
            if not class_mask(node) & cls._wanted:
                return None
            return cls._method(type(node))(self, node)
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
    buffer_map: dict = {}

    def __init__(self, buffer_map: dict | None = None):
        self.buffer_map = buffer_map or {}

    def visit(self, node):
        if isinstance(node, Node):
            cls = type(self)
            if not class_mask(node) & (cls._wanted | _BUFFER_BIT if self.buffer_map else cls._wanted):
                return node
            return cls._method(type(node))(self, node)
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


_BUFFER_BIT = _bit(Buffer)
Visitor._walker = Visitor
Mutator._walker = Mutator
Visitor._walks_all = Mutator._walks_all = False
_WALKED = (Node, tuple, list)


def collect(node, predicate) -> list:
    """All nodes under `node` (pre-order) for which `predicate(n)` is true.

    What a `Visitor` whose `generic` tests each node would find (Buffers are leaves, tuples, lists
    and dicts are walked, a node's non-node fields are not; tests/ir/test_ir.py checks both find
    the same).  The passes call it ~100 times per kernel, mostly on subtrees no pass has rebuilt
    since the last call, so each node keeps the pre-order of its subtree (`_preorder`): a repeated
    call is one predicate test per node.  (Lowering 60 fuzzed programs for the CPU, sm_80, sm_90a
    and sm_90a-ws: 1.68 CPU-s with a recursive walk per call, half of it here.)"""
    if isinstance(node, Node) and not isinstance(node, Buffer):
        return [n for n in _preorder(node)[0] if predicate(n)]
    parts: list = []
    _gather(node, parts)
    return [n for part in parts for n in part if predicate(n)]


_PRE = "_tc_preorder"   # a node's cached pre-order: (the node, its descendants...)
_SEQ = (tuple, list)


def _preorder(node) -> tuple:
    """(the nodes of `node`'s subtree in pre-order, whether the subtree holds only immutable
    containers).  Nodes are frozen, so the tuple is kept on the node unless a list or dict was
    reached (a builder could still change one); the first element is the node itself, which tells
    a cached tuple from one a shallow copy carried over."""
    pre = node.__dict__.get(_PRE)
    if pre is not None and pre[0] is node:
        return pre, True
    parts = [(node,)]
    frozen = True
    for name in _field_names(type(node)):
        v = getattr(node, name)
        if isinstance(v, _WALKED):
            frozen = _gather(v, parts) and frozen
    pre = tuple(n for part in parts for n in part) if len(parts) > 1 else parts[0]
    if frozen:
        node.__dict__[_PRE] = pre
    return pre, frozen


def _gather(v, parts: list) -> bool:
    """Append the pre-orders reached from `v` (a node, or a tuple / list / dict walked as the
    Visitor walks them) to `parts`; False when a mutable container was among them."""
    if isinstance(v, Node):
        if isinstance(v, Buffer):
            parts.append((v,))
            return True
        pre, frozen = _preorder(v)
        parts.append(pre)
        return frozen
    if isinstance(v, _SEQ):
        frozen = type(v) is tuple
        for x in v:
            if isinstance(x, _WALKED) or isinstance(x, dict):
                frozen = _gather(x, parts) and frozen
        return frozen
    if isinstance(v, dict):
        for x in v.values():
            _gather(x, parts)
        return False
    return True


def substitute(node, mapping: dict):
    """Replace Vars (by identity) with expressions throughout `node`."""
    if not mapping:
        return node

    class _S(Mutator):
        def visit_Var(self, v):
            return mapping.get(v, v)

    return _S().visit(node)
