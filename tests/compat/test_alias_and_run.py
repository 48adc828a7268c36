"""The zero-edit path: `import tilelang[.X]` answered by tilecraft's own module objects, and
`tilecraft run prog.py` running an unmodified TileLang program (CPU target) end to end."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import tilecraft
import tilecraft.compat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def alias():
    was = tilecraft.compat.installed()
    tilecraft.compat.install()
    yield
    if not was:
        tilecraft.compat.uninstall()


def test_imports_are_the_same_objects(alias):
    import tilelang
    import tilelang.language as T
    from tilelang.profiler import do_bench
    from tilelang.utils.tensor import map_torch_type
    import tilelang.testing
    assert tilelang is tilecraft and T is tilecraft.language
    assert do_bench is tilecraft.profiler.do_bench and map_torch_type is tilecraft.utils.tensor.map_torch_type
    assert tilelang.testing is sys.modules["tilecraft.testing"]
    assert tilelang.PassConfigKey.TL_ENABLE_FAST_MATH == "tl.enable_fast_math"


def test_install_is_idempotent_and_uninstall_removes_the_names(alias):
    tilecraft.compat.install()
    assert sum(isinstance(f, tilecraft.compat.AliasFinder) for f in sys.meta_path) == 1
    import tilelang  # noqa: F401
    tilecraft.compat.uninstall()
    assert "tilelang" not in sys.modules and not tilecraft.compat.installed()
    tilecraft.compat.install()


def test_a_missing_submodule_says_what_is_missing(alias):
    with pytest.raises(ModuleNotFoundError, match="tilelang.not_a_module.*tilecraft.not_a_module"):
        import tilelang.not_a_module  # noqa: F401


def test_carver_template_recommends_tiles_the_gemm_compiles_with(alias):
    """TileLang's GEMM autotuning examples: MatmulTemplate(...).with_arch(CUDA("cuda")) gives hints whose
    configs compile and compute the GEMM (CPU target against torch, small sizes)."""
    import torch
    import tilecraft
    import tilecraft.kernels as K
    from tilelang.carver.arch import CUDA
    from tilelang.carver.roller.rasterization import NoRasterization  # noqa: F401 - the import the examples do
    from tilelang.carver.template import MatmulTemplate
    t = MatmulTemplate(M=256, N=256, K=128, in_dtype="float16", out_dtype="float16", accum_dtype="float32")
    t = t.with_arch(CUDA("cuda"))
    assert t.equivalent_function() is not None
    hints = t.recommend_hints(topk=4)
    assert 1 <= len(hints) <= 4
    a, b = torch.randn(256, 128).half(), torch.randn(128, 256).half()
    for h in hints[:2]:
        bm, bn = h.block
        k = tilecraft.compile(K.matmul.fn(256, 256, 128, block_M=bm, block_N=bn, block_K=h.rstep[0],
                                          num_stages=h.pipeline_stage, threads=h.threads), out_idx=[-1], target="cpu")
        torch.testing.assert_close(k(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


def test_device_queries_of_contrib_and_carver(alias):
    import torch
    from tilelang.carver.arch import driver
    from tilelang.contrib import nvcc
    assert nvcc.parse_compute_version("9.0") == (9, 0)
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        assert nvcc.get_target_compute_version() == f"{major}.{minor}"
        assert driver.get_num_sms() == torch.cuda.get_device_properties(0).multi_processor_count
    else:
        with pytest.raises(ValueError, match="no CUDA device"):
            nvcc.get_target_compute_version()
        with pytest.raises(RuntimeError, match="no CUDA device"):
            driver.get_num_sms()


PROGRAM = textwrap.dedent('''
    import sys
    import torch
    import tilelang
    import tilelang.language as T
    from tilelang.utils.tensor import torch_assert_close
    import helper_module                      # a sibling module, as TileLang's examples have

    @tilelang.jit(out_idx=[-1], target="cpu", pass_configs={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True})
    def axpy(N, alpha, block=64):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
            with T.Kernel(tilelang.cdiv(N, block), threads=block) as bx:
                for i in T.Parallel(block):
                    Z[bx * block + i] = X[bx * block + i] * T.float32(alpha) + Y[bx * block + i]
        return main

    def main():
        n = int(sys.argv[1])
        x, y = torch.randn(n), torch.randn(n)
        z = axpy(n, helper_module.ALPHA)(x, y)
        torch_assert_close(z, x * helper_module.ALPHA + y, rtol=1e-5, atol=1e-5)
        print("ok", __name__, n)
        sys.exit(int(sys.argv[2]))

    if __name__ == "__main__":
        main()
''')


def test_tilecraft_run_runs_an_unmodified_program(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "helper_module.py").write_text("ALPHA = 1.5\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "tilecraft", "run", str(tmp_path / "prog.py"), "200", "0"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "ok __main__ 200" in out.stdout
    # the program's own exit status passes through, and nothing named tilelang exists on disk
    out = subprocess.run([sys.executable, "-m", "tilecraft", "run", str(tmp_path / "prog.py"), "70", "3"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 3 and "ok __main__ 70" in out.stdout, out.stderr
    plain = subprocess.run([sys.executable, "-c", "import tilelang"], capture_output=True, text=True,
                           env=env, cwd=str(tmp_path), timeout=60)
    assert plain.returncode != 0 and "No module named 'tilelang'" in plain.stderr


def test_tilecraft_run_reports_a_missing_program(tmp_path):
    out = subprocess.run([sys.executable, "-m", "tilecraft", "run", str(tmp_path / "nope.py")],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=60)
    assert out.returncode == 2 and "no such program" in out.stderr


def test_cuda_postproc_callback_rewrites_the_compiled_source(alias):
    """tilelang.engine.callback: the registered function sees the generated CUDA source and its
    result is what gets compiled (here: a define the kernel needs), and it is part of the cache key."""
    import tilelang
    import tilelang.language as T
    from tilelang.engine import callback
    from tilelang.engine.callback import register_cuda_postproc_callback

    def program(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(N):
                    B[i] = A[i] + 1
        return main
    sm80 = {"kind": "cuda", "arch": "sm_80"}
    plain = tilelang.compile(program(32), target=sm80).get_kernel_source()
    try:
        @register_cuda_postproc_callback
        def add_marker(code, target):
            return "// postprocessed for " + str(target) + "\n" + code
        edited = tilelang.compile(program(32), target=sm80).get_kernel_source()
    finally:
        callback._CUDA_POSTPROC.clear()
    assert "// postprocessed for" not in plain and edited.startswith("// postprocessed for")
    assert tilelang.compile(program(32), target=sm80).get_kernel_source() == plain


def test_postproc_callbacks_made_by_one_factory_are_not_served_each_others_kernels(alias):
    """Two callbacks from the same factory share their code and differ in a closure value (or a
    default): each must get its own compile, not the other's cached kernel."""
    import tilelang
    import tilelang.language as T
    from tilelang.engine import callback
    from tilelang.engine.callback import register_cuda_postproc_callback

    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(32):
                B[i] = A[i] * 3
    sm80 = {"kind": "cuda", "arch": "sm_80"}

    def marker(text):
        def edit(code, target):
            return f"// {text}\n" + code
        return edit

    def marker_by_default(code, target, text="first"):
        return f"// {text}\n" + code
    seen = []
    try:
        for made in (marker("first"), marker("second")):
            register_cuda_postproc_callback(made)
            seen.append(tilelang.compile(main, target=sm80).get_kernel_source().splitlines()[0])
        for text in ("third", "fourth"):
            marker_by_default.__defaults__ = (text,)
            register_cuda_postproc_callback(marker_by_default)
            seen.append(tilelang.compile(main, target=sm80).get_kernel_source().splitlines()[0])
    finally:
        callback._CUDA_POSTPROC.clear()
    assert seen == ["// first", "// second", "// third", "// fourth"]


def test_a_jit_factory_compiles_again_after_a_postproc_callback_is_registered(alias):
    import tilelang
    import tilelang.language as T
    from tilelang.engine import callback
    from tilelang.engine.callback import register_cuda_postproc_callback

    @tilelang.jit(target={"kind": "cuda", "arch": "sm_80"})
    def scale(N, k):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(N):
                    B[i] = A[i] * k
        return main
    plain = scale(32, 5).get_kernel_source()
    try:
        @register_cuda_postproc_callback
        def mark(code, target):
            return "// marked\n" + code
        marked = scale(32, 5).get_kernel_source()
    finally:
        callback._CUDA_POSTPROC.clear()
    assert not plain.startswith("// marked") and marked.startswith("// marked")
    assert scale(32, 5).get_kernel_source() == plain


def test_a_dtype_reads_as_its_name_character_by_character():
    # TileLang's dequantize examples take the storage width out of the dtype's spelling
    import tilecraft.language as T
    assert "".join(c for c in T.int8 if c.isdigit()) == "8"
    assert "".join(c for c in T.uint32 if not c.isdigit()) == "uint"


def test_an_eager_jit_compiles_again_after_a_postproc_callback_is_registered(alias):
    import tilelang
    import tilelang.language as T
    from tilelang.engine import callback
    from tilelang.engine.callback import register_cuda_postproc_callback

    @tilelang.jit(target={"kind": "cuda", "arch": "sm_80"})
    def twice(X):
        N = T.const("N")
        X: T.Tensor[(N,), T.float32]
        Y = T.empty((N,), T.float32)
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                Y[i] = X[i] * 2
        return Y
    plain = twice.compile(N=64).get_kernel_source()
    try:
        @register_cuda_postproc_callback
        def mark(code, target):
            return "// marked\n" + code
        marked = twice.compile(N=64).get_kernel_source()
    finally:
        callback._CUDA_POSTPROC.clear()
    assert not plain.startswith("// marked") and marked.startswith("// marked")
    assert twice.compile(N=64).get_kernel_source() == plain
