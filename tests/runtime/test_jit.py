"""The compiled kernel as a user calls it (SPEC §1, §7): `@tilelang.jit` and `tilelang.compile`,
out_idx forms, explicit outputs, argument checks at call time, introspection, and the disk cache
seen from a fresh process."""
from __future__ import annotations

import os
import sys
import textwrap

import pytest

from fresh_python import run_python  # tests/: a fresh process without paying `import torch`
import torch

import tilecraft
import tilecraft as tilelang
import tilecraft.language as T


def saxpy_func(N, block=64):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                Z[bx * block + i] = 2.0 * X[bx * block + i] + Y[bx * block + i]
    return main


@pytest.fixture(scope="module")
def saxpy():
    return tilelang.compile(saxpy_func(100), out_idx=-1, target="cpu")


# ---- compile / out_idx / explicit outputs ---------------------------------------------------------

def test_compile_bare_prim_func_out_idx_int(saxpy):
    x, y = torch.randn(100), torch.randn(100)
    z = saxpy(x, y)
    assert isinstance(z, torch.Tensor) and z.shape == (100,)
    torch.testing.assert_close(z, 2 * x + y)
    assert saxpy.out_idx == [2]


@pytest.mark.parametrize("out_idx", [[2], -1, [-1], 2])
def test_out_idx_forms_are_equivalent(out_idx):
    k = tilelang.compile(saxpy_func(100), out_idx=out_idx, target="cpu")
    assert k.out_idx == [2]
    x, y = torch.randn(100), torch.randn(100)
    torch.testing.assert_close(k(x, y), 2 * x + y)


def test_passing_outputs_explicitly_writes_into_them(saxpy):
    x, y = torch.randn(100), torch.randn(100)
    z = torch.full((100,), float("nan"))
    saxpy(x, y, z)
    torch.testing.assert_close(z, 2 * x + y)


def test_no_out_idx_returns_none_and_writes_in_place():
    k = tilelang.compile(saxpy_func(100), target="cpu")
    x, y, z = torch.randn(100), torch.randn(100), torch.zeros(100)
    assert k(x, y, z) is None
    torch.testing.assert_close(z, 2 * x + y)


@tilelang.jit(out_idx=[-2, -1], target="cpu")
def two_outputs(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), S: T.Tensor((N,), "float32"), D: T.Tensor((N,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                S[i] = X[i] * X[i]
                D[i] = T.cast(X[i] > 0, "int32")
    return main


def test_out_idx_list_returns_tuple_in_parameter_order():
    x = torch.randn(30)
    s, d = two_outputs(30)(x)
    torch.testing.assert_close(s, x * x)
    assert d.dtype == torch.int32 and torch.equal(d, (x > 0).int())


def test_out_idx_out_of_range_is_an_error():
    with pytest.raises(ValueError, match="out_idx"):
        tilelang.compile(saxpy_func(100), out_idx=3, target="cpu")


def test_compile_rejects_non_prim_func():
    with pytest.raises(TypeError, match="prim_func"):
        tilelang.compile(saxpy_func, target="cpu")


def test_jit_factory_caches_per_argument_set():
    k1, k2, k3 = two_outputs(30), two_outputs(30), two_outputs(31)
    assert k1 is k2 and k1 is not k3


def test_unknown_pass_config_key_is_an_error():
    with pytest.raises(ValueError, match="tl.no_such_option"):
        tilelang.compile(saxpy_func(100), out_idx=-1, target="cpu", pass_configs={"tl.no_such_option": True})


def test_known_pass_config_accepted():
    k = tilelang.compile(saxpy_func(100), out_idx=-1, target="cpu",
                         pass_configs={"tl.disable_tma_lower": True})
    x, y = torch.randn(100), torch.randn(100)
    torch.testing.assert_close(k(x, y), 2 * x + y)


# ---- introspection ----------------------------------------------------------------------------------

def test_introspection(saxpy):
    src = saxpy.get_kernel_source()
    assert "tc_entry" in src
    assert [p.name for p in saxpy.params] == ["X", "Y", "Z"]
    assert [p.is_output for p in saxpy.params] == [False, False, True]
    ir = saxpy.get_ir()
    assert "T.Kernel(2" in ir and "T.Parallel(64)" in ir and "Z[" in ir
    assert "2.0" in saxpy.get_lowered_ir() or "2.0" in src


# ---- argument checks at call time -------------------------------------------------------------------

def test_wrong_dtype_is_type_error_naming_kernel_param_expected_actual(saxpy):
    with pytest.raises(TypeError) as ei:
        saxpy(torch.randn(100).half(), torch.randn(100))
    msg = str(ei.value)
    assert "main" in msg and "'X'" in msg and "float32" in msg and "float16" in msg


def test_wrong_shape_is_value_error(saxpy):
    with pytest.raises(ValueError) as ei:
        saxpy(torch.randn(100), torch.randn(99))
    msg = str(ei.value)
    assert "'Y'" in msg and "100" in msg and "99" in msg


def test_wrong_rank_is_value_error(saxpy):
    with pytest.raises(ValueError, match=r"'X'.*dimension"):
        saxpy(torch.randn(10, 10), torch.randn(100))


def test_non_contiguous_is_value_error_mentioning_strides(saxpy):
    x = torch.randn(200)[::2]
    assert x.shape == (100,) and not x.is_contiguous()
    with pytest.raises(ValueError, match=r"(?s)'X'.*strides"):
        saxpy(x, torch.randn(100))


def test_wrong_device_is_rejected(saxpy):
    with pytest.raises(TypeError, match=r"(?s)'X'.*device"):
        saxpy(torch.empty(100, device="meta"), torch.randn(100))


def test_fast_path_falls_back_to_the_detailed_checks(saxpy):
    """The per-call fast test (exact torch.Tensor, dtype, device, static shape, contiguous) only
    short-cuts the checks: a tensor subclass still runs, and a bad argument after good calls still
    gets the detailed message."""
    x, y = torch.randn(100), torch.randn(100)
    for _ in range(3):
        torch.testing.assert_close(saxpy(x, y), 2 * x + y)
    p = torch.nn.Parameter(x.clone(), requires_grad=False)
    torch.testing.assert_close(saxpy(p, y), 2 * x + y)
    z = torch.empty(100)
    assert saxpy(x, y, z) is z
    torch.testing.assert_close(z, 2 * x + y)
    with pytest.raises(TypeError, match=r"'Y'.*float64"):
        saxpy(x, y.double())
    with pytest.raises(ValueError, match=r"'Z'.*strides"):
        saxpy(x, y, torch.empty(200)[::2])


def test_not_a_tensor_is_type_error(saxpy):
    with pytest.raises(TypeError, match="'Y'"):
        saxpy(torch.randn(100), [0.0] * 100)


@pytest.mark.parametrize("nargs", [0, 1, 4])
def test_wrong_number_of_arguments(saxpy, nargs):
    with pytest.raises(TypeError, match=r"main.*expects 2"):
        saxpy(*[torch.randn(100) for _ in range(nargs)])


def test_explicit_output_is_checked_too(saxpy):
    with pytest.raises(ValueError, match="'Z'"):
        saxpy(torch.randn(100), torch.randn(100), torch.empty(50))


@tilelang.jit(out_idx=[-1], target="cpu")
def dyn_add(block=32):
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return main


def test_symbolic_dimension_must_agree_across_arguments():
    with pytest.raises(ValueError, match=r"(?s)'B'.*'n'"):
        dyn_add()(torch.randn(10), torch.randn(11))


def test_symbolic_dimension_output_allocated_from_inputs():
    a, b = torch.randn(45), torch.randn(45)
    c = dyn_add()(a, b)
    assert c.shape == (45,)
    torch.testing.assert_close(c, a + b)


@tilelang.jit(out_idx=[-1], target="cpu")
def unbound_output_symbol():
    n, m = T.dynamic("n"), T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((m,), "float32")):
        with T.Kernel(1) as bx:
            Y[0] = X[0]
    return main


def test_output_with_symbol_no_input_fixes_is_a_clear_error():
    with pytest.raises(ValueError, match=r"(?s)'Y'.*'m'"):
        unbound_output_symbol()(torch.randn(5))


# ---- disk cache in fresh processes ---------------------------------------------------------------

_SCRIPT = textwrap.dedent("""
    import time, torch
    import tilecraft as tilelang
    import tilecraft.language as T

    @tilelang.jit(out_idx=[-1], target="cpu")
    def scale(N, factor):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, 32)) as bx:
                for i in T.Parallel(32):
                    Y[bx * 32 + i] = X[bx * 32 + i] * factor + T.exp(X[bx * 32 + i])
        return main

    t0 = time.perf_counter()
    k = scale(77, 3.25)
    dt = time.perf_counter() - t0
    x = torch.randn(77)
    assert torch.allclose(k(x), x * 3.25 + x.exp(), rtol=1e-5, atol=1e-5)
    print("RESULT", k.artifact.from_cache, dt)
""")


def _run_script(path, cache_dir, disable=False):
    env = dict(os.environ, TILECRAFT_CACHE_DIR=str(cache_dir))
    for k in ("TILECRAFT_DISABLE_CACHE", "TILELANG_DISABLE_CACHE", "TILELANG_CACHE_DIR"):
        env.pop(k, None)
    if disable:
        env["TILECRAFT_DISABLE_CACHE"] = "1"
    proc = run_python([sys.executable, str(path)], env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    _, from_cache, seconds = line.split()
    return from_cache == "True", float(seconds)


def test_disk_cache_hit_in_fresh_process_and_disable_bypasses_it(tmp_path):
    script = tmp_path / "user_kernel.py"
    script.write_text(_SCRIPT)
    cache = tmp_path / "cache"
    hit1, t1 = _run_script(script, cache)
    hit2, t2 = _run_script(script, cache)
    hit3, _ = _run_script(script, cache, disable=True)
    assert (hit1, hit2, hit3) == (False, True, False)
    print(f"compile {t1:.3f}s, cached load {t2:.3f}s")  # the hit flags above are the test; times only shown
    assert any((cache / "kernels").rglob("*.so")), "nothing was written under TILECRAFT_CACHE_DIR"
