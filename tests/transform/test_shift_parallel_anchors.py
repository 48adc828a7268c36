"""transform/shift_parallel_anchors.py, IR in / IR out: a T.Parallel nest that reaches its fragment
only at a uniform offset (`acc[i + s * 16, j]`) is re-based onto the fragment's coordinates with the
shifted range as a guard; nests with an anchor are returned as the same objects."""
from __future__ import annotations

import tilecraft.language as T
from tilecraft.ir import For, If, Load, Store, collect, to_text
from tilecraft.transform.shift_parallel_anchors import shift_parallel_anchors


def staged(shifted: bool):
    @T.prim_func
    def main(A: T.Tensor((32, 16), "float32"), C: T.Tensor((32, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((32, 16), "float32")
            st = T.alloc_shared((16, 16), "float32")
            T.copy(A, acc)
            for s in range(2):
                for i, j in T.Parallel(32, 16):
                    if i < 16:
                        if shifted:
                            st[i, j] = acc[i + s * 16, j]
                        else:
                            st[i, j] = acc[i, j]
                T.copy(st, C[s * 16, 0])
    return main


def test_shifted_nest_is_rebased_with_a_guard():
    f = staged(True)
    out = shift_parallel_anchors(f, None)
    assert out is not f
    loads = [n for n in collect(out.body, lambda n: isinstance(n, Load)) if n.buffer.name == "acc"]
    loops = [n for n in collect(out.body, lambda n: isinstance(n, For) and n.kind == "parallel")]
    assert len(loads) == 1
    # the fragment is now indexed by exactly the nest's loop variables
    assert [ix is lp.var for ix, lp in zip(loads[0].indices, loops)] == [True, True]
    text = to_text(out.body)
    guards = [to_text(n.cond) for n in collect(out.body, lambda n: isinstance(n, If))]
    i = loops[0].var.name
    assert f"{i} - s * 16 >= 0 and {i} - s * 16 < 32" in guards, text
    store = [n for n in collect(out.body, lambda n: isinstance(n, Store)) if n.buffer.name == "st"][0]
    assert to_text(store.indices[0]) == f"{loops[0].var.name} - s * 16", text


def test_anchored_nest_is_untouched():
    f = staged(False)
    assert shift_parallel_anchors(f, None) is f
