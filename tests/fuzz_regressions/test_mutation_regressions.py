"""What the fuzzer's mutation mode (tilecraft/testing/fuzz_mutate.py) found: invalid programs that were
accepted, refused at another line, or refused with a non-tilecraft exception.  Each program is the
mutant shrunk by hand; each must be refused with a TilecraftError at the mutated line, on the CPU
target and for CUDA (lowering only).  (Valid mutants that failed are saved as fz_m*.py programs and
run by test_regressions.py.)"""
from __future__ import annotations

import textwrap

import pytest

from tilecraft.errors import TilecraftError
from tilecraft.target import Target
from tilecraft.testing.fuzz_build import lower
from tilecraft.testing.fuzz_run import load_module

HEAD = "import tilecraft.language as T\n\n\n"


def _load(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + textwrap.dedent(body))
    return str(path)


def _line(path, marker):
    return next(n for n, text in enumerate(open(path).read().splitlines(), 1) if marker in text)


def _refused_at(err, path, marker, what):
    assert isinstance(err, TilecraftError), repr(err)
    assert err.span is not None and err.span.file == path, str(err)
    assert err.span.line == _line(path, marker), str(err)
    assert what in str(err), str(err)


def test_negative_tensor_shape_in_an_annotation_is_refused_at_the_def_line(tmp_path):
    # fzm_1_4 (`tensor shape`): a TypeError with no line, raised while Python evaluated the annotation
    path = _load(tmp_path, "neg_shape", """\
        @T.prim_func
        def main(X: T.Tensor((-5, 16), "float32")):  # MUT
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(16):
                    X[0, i] = 1.0
        """)
    with pytest.raises(TilecraftError) as e:
        load_module(path)
    assert isinstance(e.value, TypeError)    # as before, for code that catches that
    _refused_at(e.value, path, "# MUT", "got -5")


def test_parallel_extent_zero_is_refused(tmp_path):
    # fzm_1_2 (`T.Parallel extent 0`): accepted, the loop ran no iteration and the output kept its garbage
    path = _load(tmp_path, "par_zero", """\
        @T.prim_func
        def main(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i, j in T.Parallel(0, 16):  # MUT
                    Y[i, j] = X[i, j]
        """)
    with pytest.raises(TilecraftError) as e:
        load_module(path)
    _refused_at(e.value, path, "# MUT", "extent of 0")


GUARDED = """\
    @T.prim_func
    def main(X: T.Tensor((65, 64), "float32"), Y: T.Tensor((65, 64), "float32")):
        with T.Kernel(65, threads=64) as b:
            for k in T.Parallel(64):
                if b < 65 and k < 64:
                    Y[b, k] = X[64 - b, 63 - k + 64]  # MUT
    """


@pytest.mark.parametrize("target", ["cpu", "sm_80", "sm_90a"])
def test_a_load_past_the_end_under_a_guard_on_its_variables_is_refused(tmp_path, target):
    # fzm_2_61 (`load past the end`): the guard tested the index's variables, so the access was left to
    # it; the guard bounds k to [0, 63], so the column 127 - k is never inside X
    path = _load(tmp_path, "guarded", GUARDED)
    func = load_module(path).main
    tgt = Target.resolve("cpu" if target == "cpu" else {"kind": "cuda", "arch": target})
    with pytest.raises(TilecraftError) as e:
        lower(func, tgt, {})
    _refused_at(e.value, path, "# MUT", "is never inside X")


def test_a_guard_that_keeps_the_access_inside_is_still_accepted(tmp_path):
    path = _load(tmp_path, "guarded_ok", GUARDED.replace("63 - k + 64", "k + 32").replace("k < 64", "k < 32"))
    assert "Y[" in lower(load_module(path).main, Target.resolve("cpu"), {})


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_a_shared_tile_over_the_limit_is_refused_at_its_allocation(tmp_path, arch):
    # fzm_2_33 (`tile size 1 << 28`): refused at the T.Kernel line, not the tile's
    path = _load(tmp_path, "huge_tile", """\
        @T.prim_func
        def main(X: T.Tensor((64, 16), "float16"), Y: T.Tensor((64, 16), "float16")):
            with T.Kernel(1, threads=128) as bx:
                S = T.alloc_shared((1 << 16, 16), "float16")  # MUT
                T.copy(X[0, 0], S)
                T.copy(S, Y[0, 0])
        """)
    with pytest.raises(TilecraftError) as e:
        lower(load_module(path).main, Target.resolve({"kind": "cuda", "arch": arch}), {})
    _refused_at(e.value, path, "# MUT", "shared memory per block")


@pytest.mark.parametrize("target", ["cpu", "sm_80"])
def test_a_store_past_a_static_dimension_of_a_dynamic_tensor_is_refused(tmp_path, target):
    # fzm_7_140 (`store past the end`): a tensor with a dynamic dimension skipped the check altogether;
    # its static dimension (32 columns) is never reached by k * 16 + x + 32
    path = _load(tmp_path, "dyn_rows", """\
        M = T.dynamic("M")


        @T.prim_func
        def main(X: T.Tensor((M, 32), "float32"), Y: T.Tensor((M, 32), "float32")):
            with T.Kernel(2, T.ceildiv(M, 32), threads=32) as (k, i):
                for r, x in T.Parallel(32, 16):
                    Y[i * 32 + r, k * 16 + x + 32] = X[i * 32 + r, k * 16 + x]  # MUT
        """)
    tgt = Target.resolve("cpu" if target == "cpu" else {"kind": "cuda", "arch": target})
    with pytest.raises(TilecraftError) as e:
        lower(load_module(path).main, tgt, {})
    _refused_at(e.value, path, "# MUT", "is never inside Y")


COMPOUND = """\
    @T.prim_func
    def main(X: T.Tensor((32, 32), "float32"), Y: T.Tensor((32, 32), "float32")):
        with T.Kernel(2, 2, threads=32) as (bx, by):
            for r, c in T.Parallel(16, 16):
                if by * 16 + r < 32 and bx * 16 + c < 32:
                    Y[by * 16 + r, bx * 16 + c + 32] = X[31 - (by * 16 + r), 31 - (bx * 16 + c)]  # MUT
    """


def test_a_store_past_the_end_under_a_guard_on_a_compound_index_is_refused(tmp_path):
    # fzm_7_172 (`store past the end`): the guard bounds `bx * 16 + c`, which the index holds plus 32
    path = _load(tmp_path, "compound", COMPOUND)
    with pytest.raises(TilecraftError) as e:
        lower(load_module(path).main, Target.resolve("cpu"), {})
    _refused_at(e.value, path, "# MUT", "is never inside Y")
    ok = _load(tmp_path, "compound_ok", COMPOUND.replace("bx * 16 + c + 32]", "bx * 16 + c]"))
    assert "Y[" in lower(load_module(ok).main, Target.resolve("cpu"), {})


def test_a_serial_loop_with_a_negative_count_is_refused(tmp_path):
    # fzm_7_81 (`T.serial extent -2`): accepted as an empty loop (T.Pipelined already refused it)
    path = _load(tmp_path, "neg_serial", """\
        @T.prim_func
        def main(X: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for k in T.serial(-2):  # MUT
                    for i in T.Parallel(16):
                        X[i] = X[i] + 1.0
        """)
    with pytest.raises(TilecraftError) as e:
        load_module(path)
    _refused_at(e.value, path, "# MUT", "negative number of iterations")


LAYOUT = """\
    @T.prim_func
    def main(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((16, 16), "float32")
            T.annotate_layout({S: T.Layout((16, 16), lambda i, j: [i, FORWARD])})  # MUT
            T.copy(X, S)
            T.copy(S, Y)
    """


def test_a_layout_that_is_not_one_to_one_is_refused_at_its_line(tmp_path):
    # issue 26: two logical elements mapped to the same physical slot (here j and j + 8)
    path = _load(tmp_path, "layout_bad", LAYOUT.replace("FORWARD", "j % 8"))
    with pytest.raises(TilecraftError) as e:
        load_module(path)
    _refused_at(e.value, path, "# MUT", "sends both S[0, 0] and S[0, 8] to [0, 0]")


def test_a_one_to_one_layout_is_accepted_and_changes_nothing(tmp_path):
    import torch
    import tilecraft
    path = _load(tmp_path, "layout_ok", LAYOUT.replace("FORWARD", "(j + i) % 16"))
    x, y = torch.randn(16, 16), torch.zeros(16, 16)
    tilecraft.compile(load_module(path).main, target="cpu")(x, y)
    assert torch.equal(x, y)
