"""place_bulk_waits alone (module docstring: transform/place_bulk_waits.py): after lower_cuda a
`T.atomic_add` of a shared tile on sm_90a is issued as bulk reduces closed by a BulkCommit and no
wait; the pass puts a BulkWaitRead of that tile and a block barrier before the statement that writes
the tile again (the next iteration's copy into it, ahead of the commit in the loop body), and one
BulkWaitRead right after the loop that issued them.  On sm_80 (element atomics) nothing changes."""
from __future__ import annotations

import os
import sys

from tilecraft.ir import For, Store, collect
from tilecraft.ir import intrinsics as I
from tilecraft.ir.intrinsics.base import IntrinsicCall
from tilecraft.ir.stmt import Evaluate, stmts_of
from tilecraft.transform.place_bulk_waits import place_bulk_waits

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_bulk_reduce import scatter_add  # noqa: E402
from test_cuda_passes import SM80, SM90, around  # noqa: E402


def calls(node, cls):
    return collect(node, lambda n: isinstance(n, IntrinsicCall) and isinstance(n.intrinsic, cls))


def kind(stmt):
    if isinstance(stmt, Evaluate) and isinstance(stmt.value, IntrinsicCall):
        return type(stmt.value.intrinsic).__name__
    return type(stmt).__name__


def test_the_wait_comes_before_the_tile_is_written_again_and_before_the_block_exits():
    before, after = around(scatter_add(6, 120, 64, 32, 20, 3), SM90, place_bulk_waits)
    assert calls(before.body, I.BulkCommit) and not calls(before.body, I.BulkWaitRead)
    (loop,) = [f for f in collect(after.body, lambda n: isinstance(n, For)) if f.var.name == "it"]
    body = stmts_of(loop.body)
    writes_s = [i for i, s in enumerate(body)
                if collect(s, lambda n: isinstance(n, IntrinsicCall) and isinstance(n.intrinsic, I.VecStore))
                or collect(s, lambda n: isinstance(n, Store) and n.buffer.name == "s")]
    commit = next(i for i, s in enumerate(body) if kind(s) == "BulkCommit")
    first = writes_s[0]
    assert first < commit and [kind(s) for s in body[first - 2:first]] == ["BulkWaitRead", "Sync"]
    (wait,) = calls(loop.body, I.BulkWaitRead)
    assert wait.args[0].buffer.name == "s"
    # right after the loop that issued them: from there the tile's bytes are free for later buffers
    kernel_body = stmts_of(collect(after.body, lambda n: type(n).__name__ == "Kernel")[0].body)
    at = next(i for i, s in enumerate(kernel_body) if s is loop or collect(s, lambda n: n is loop))
    assert kind(kernel_body[at + 1]) == "BulkWaitRead"


def test_a_kernel_without_bulk_reduces_is_returned_as_it_is():
    before, after = around(scatter_add(6, 120, 64, 32, 20, 3), SM80, place_bulk_waits)
    assert not calls(before.body, I.BulkCommit) and after is before
