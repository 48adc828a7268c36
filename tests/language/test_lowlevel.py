"""TVM's low-level constructs (language/lowlevel.py): `T.import_source` + `T.call_extern` +
`T.access_ptr` on the CPU target against numpy (the lop3 float16 decoders of tilelang.quantize
decoding `interleave_weight`'s layout, for both field formats), the imported text in the program's
printed IR and so in its cache key, `T.thread_binding` + `T.tvm_thread_allreduce` compiled for
sm_80 / sm_90a (xor shuffles over the named threads' lane bits, the decoder's LOP3 in SASS), and
each misuse refused at its line.  GPU twin: tests/gpu/test_lowlevel_gpu.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tilecraft as tilelang
import tilecraft.language as T
from tilecraft.errors import TilecraftError
from tilecraft.quantize import get_lop3_intrin_group
from tilecraft.quantize.utils import interleave_weight

SM80 = {"kind": "cuda", "arch": "sm_80"}
SM90 = {"kind": "cuda", "arch": "sm_90a"}


def decode_program(N, K, fmt):
    """Out[n, :] = the decoded 4-bit fields of row n of the interleaved B, 8 per extern call."""
    lop3 = get_lop3_intrin_group(out_dtype="float16", source_format=fmt, source_bit=4, storage_dtype="int8")

    @T.prim_func
    def main(B: T.Tensor((N, K // 2), "int8"), Out: T.Tensor((N, K), "float16")):
        with T.Kernel(N, threads=32) as bx:
            q = T.alloc_local((4,), "int8")
            w = T.alloc_local((8,), "float16")
            T.import_source(lop3["c_source"])
            for kq in T.serial(K // 8):
                for v in T.serial(4):
                    q[v] = B[bx, kq * 4 + v]
                T.call_extern(lop3["func_name"], T.access_ptr(q, "r"), T.access_ptr(w, "w"), dtype="float16")
                for v in T.serial(8):
                    Out[bx, kq * 8 + v] = w[v]
    return main


def fields(b: np.ndarray, signed: bool) -> np.ndarray:
    """The 4-bit fields of the packed (not interleaved) bytes, low nibble first; 'int' holds e + 8."""
    u = b.view(np.uint8).astype(np.int64)
    f = np.stack([u & 0xF, u >> 4], axis=-1).reshape(b.shape[0], -1)
    return f - 8 if signed else f


@pytest.mark.parametrize("fmt", ["uint", "int"])
def test_lop3_decoder_on_the_cpu_target(fmt):
    N, K = 4, 64
    b = torch.randint(-128, 128, (N, K // 2), dtype=torch.int8)
    k = tilelang.compile(decode_program(N, K, fmt), out_idx=[1], target="cpu")
    out = k(interleave_weight(b, 4, "float16"))
    ref = torch.from_numpy(fields(b.numpy(), fmt == "int")).half()
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


def constant_program(value_source: str):
    @T.prim_func
    def main(Out: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            T.import_source(value_source)
            for i in T.serial(4):
                Out[i] = T.call_extern("int32", "tc_test_value", i)
    return main


def test_imported_source_is_part_of_the_program_and_its_cache_key():
    one = constant_program("static inline int tc_test_value(int i) { return i + 1; }")
    two = constant_program("static inline int tc_test_value(int i) { return 10 * i; }")
    assert "T.import_source(" in one.script() and "i + 1" in one.script()
    a = tilelang.compile(one, out_idx=[0], target="cpu")()
    b = tilelang.compile(two, out_idx=[0], target="cpu")()
    assert a.tolist() == [1, 2, 3, 4] and b.tolist() == [0, 10, 20, 30]


def gemv_program(N, K, fmt, threads=(32, 4), reduce_over="x", op="sum"):
    """C[n] = sum_k A[k] * decode(B)[n, k]: threads along x split K, each y thread owns a column."""
    tx, ty = threads
    lop3 = get_lop3_intrin_group(out_dtype="float16", source_format=fmt)
    per_thread = 8
    block_k = tx * per_thread

    @T.prim_func
    def main(A: T.Tensor((K,), "float16"), B: T.Tensor((N, K // 2), "int8"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, ty), threads=(tx, ty)) as bx:
            a = T.alloc_local((per_thread,), "float16")
            q = T.alloc_local((per_thread // 2,), "int8")
            w = T.alloc_local((per_thread,), "float16")
            acc = T.alloc_local((1,), "float32")
            red = T.alloc_local((1,), "float32")
            kr = T.thread_binding(0, tx, thread="threadIdx.x")
            ni = T.thread_binding(0, ty, thread="threadIdx.y")
            T.import_source(lop3["c_source"])
            T.clear(acc)
            for ko in T.serial(K // block_k):
                for v in T.vectorized(per_thread):
                    a[v] = A[ko * block_k + kr * per_thread + v]
                for v in T.vectorized(per_thread // 2):
                    q[v] = B[bx * ty + ni, (ko * block_k + kr * per_thread) // 2 + v]
                T.call_extern(lop3["func_name"], T.access_ptr(q, "r"), T.access_ptr(w, "w"), dtype="float16")
                for v in T.serial(per_thread):
                    acc[0] += T.cast(a[v], "float32") * T.cast(w[v], "float32")
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], kr, dtype="handle"))
            if kr == 0:
                C[bx * ty + ni] = red[0]
    return main


@pytest.mark.cuda_compile
@pytest.mark.parametrize("target", [SM80, SM90], ids=["sm_80", "sm_90a"])
def test_gemv_with_extern_decoder_and_thread_allreduce_compiles(target):
    k = tilelang.compile(gemv_program(64, 512, "uint"), target=target)
    src = k.get_kernel_source()
    assert "T.import_source #1" in src and "decode_i4u_to_f16((&q[0]), (&w[0]))" in src
    assert "tc::shfl_xor_reduce<tc::SumOp, 1, 2, 4, 8, 16>(acc[0])" in src


@pytest.mark.sass
def test_decoder_is_lop3_in_sass():
    k = tilelang.compile(gemv_program(64, 512, "int"), target=SM80)
    sass = k.get_sass()
    assert "LOP3" in sass and "SHFL.BFLY" in sass


def allreduce_program(threads, axis, op):
    fn = {"sum": lambda x, y: x + y, "max": lambda x, y: T.max(x, y), "prod": lambda x, y: x * y}[op]
    shape = (threads[1], threads[0])

    @T.prim_func
    def main(X: T.Tensor(shape, "float32"), Y: T.Tensor(shape, "float32")):
        with T.Kernel(1, threads=threads) as bx:
            v = T.alloc_local((1,), "float32")
            r = T.alloc_local((1,), "float32")
            tx = T.thread_binding(0, threads[0], thread="threadIdx.x")
            ty = T.thread_binding(0, threads[1], thread="threadIdx.y")
            v[0] = X[ty, tx]
            with T.attr(T.comm_reducer(fn, [T.float32(0)]), "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, r[0], tx if axis == "x" else ty,
                                                  dtype="handle"))
            Y[ty, tx] = r[0]
    return main


@pytest.mark.cuda_compile
def test_allreduce_over_threadidx_y_uses_its_lane_bits():
    src = tilelang.compile(allreduce_program((8, 4), "y", "max"), target=SM80).get_kernel_source()
    assert "tc::shfl_xor_reduce<tc::MaxOp, 8, 16>(v[0])" in src


def _refused(build, *needles):
    with pytest.raises(TilecraftError) as e:
        tilelang.compile(build(), target=SM80)
    text = str(e.value)
    for n in needles:
        assert n in text, text
    assert "test_lowlevel.py" in text, text   # at the user's line


def test_allreduce_across_warps_is_refused():
    _refused(lambda: allreduce_program((32, 4), "y", "sum"), "inside one warp")


def test_other_combiners_are_refused():
    _refused(lambda: allreduce_program((32, 1), "x", "prod"), "x + y, T.max(x, y) or T.min(x, y)")


def test_allreduce_needs_its_reducer_scope():
    def build():
        @T.prim_func
        def main(X: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                v = T.alloc_local((1,), "float32")
                tx = T.thread_binding(0, 32, thread="threadIdx.x")
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), X[tx], True, v[0], tx, dtype="handle"))
                X[tx] = v[0]
        return main
    _refused(build, "reduce_scope")


def test_thread_binding_extent_must_match_the_launch():
    def build():
        @T.prim_func
        def main(X: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                tx = T.thread_binding(0, 64, thread="threadIdx.x")
                X[tx] = 1.0
        return main
    with pytest.raises(TilecraftError, match=r"launches 128 threads along threadIdx.x"):
        build()


def test_a_buffer_passed_to_an_extern_needs_access_ptr():
    def build():
        @T.prim_func
        def main(X: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                w = T.alloc_local((8,), "float32")
                T.call_extern("handle", "f", w)
                X[0] = w[0]
        return main
    with pytest.raises(TilecraftError, match=r"T.access_ptr\(w"):
        build()


def test_thread_level_program_is_refused_on_the_cpu_target_without_thread_emulation():
    """It runs there with its threads emulated (tests/cpu/test_cpu_threads.py); tc.cpu_threads=False refuses it."""
    with pytest.raises(TilecraftError, match="thread indices"):
        tilelang.compile(gemv_program(64, 512, "uint"), target="cpu", pass_configs={"tc.cpu_threads": False})


def test_unsupported_decoder_settings_say_what_is_there():
    with pytest.raises(TilecraftError, match="4-bit 'uint' or 'int' fields"):
        get_lop3_intrin_group(out_dtype="float16", source_format="uint", source_bit=2)



def shared_extern_program():
    """An extern fills a shared tile that T.copy then reads; an extern in a T.Parallel loop over a
    fragment; an extern reads a shared tile T.copy filled."""
    src = ("__device__ __forceinline__ void tc_test_fill(float* s, int n) { for (int i = 0; i < n; ++i) s[i] = i; }\n"
           "__device__ __forceinline__ float tc_test_twice(float v) { return 2 * v; }\n"
           "__device__ __forceinline__ float tc_test_sum(const float* s, int n) {"
           " float t = 0; for (int i = 0; i < n; ++i) t += s[i]; return t; }")

    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32"), Z: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((128,), "float32")
            x = T.alloc_shared((128,), "float32")
            f = T.alloc_fragment((128,), "float32")
            T.import_source(src)
            T.call_extern("handle", "tc_test_fill", T.access_ptr(s, "w"), 128)
            T.copy(s, f)
            for i in T.Parallel(128):
                f[i] = T.call_extern("float32", "tc_test_twice", f[i])
            T.copy(f, Y)
            T.copy(X, x)
            Z[0] = T.call_extern("float32", "tc_test_sum", T.access_ptr(x, "r"), 128)
    return main


def test_extern_calls_on_the_cpu_target():
    x = torch.randn(128)
    y, z = torch.empty(128), torch.empty(1)
    tilelang.compile(shared_extern_program(), target="cpu")(x, y, z)
    torch.testing.assert_close(y, 2 * torch.arange(128.0))
    torch.testing.assert_close(z, x.sum(0, keepdim=True), rtol=1e-5, atol=1e-4)


def test_code_of_its_own_may_use_the_cpp_math_library_on_the_cpu_target():
    """tilecraft_cpu.h leaves <cmath> / <limits> / <vector> out (they were most of every kernel's compile);
    a program that pastes in code, or calls a library function by name, still has them."""
    src = ("__device__ __forceinline__ float tc_test_norm(float a, float b) {"
           " std::vector<float> v{a, b}; return std::sqrt(v[0] * v[0] + v[1] * v[1])"
           " + (std::numeric_limits<float>::max() > 0 ? 0.0f : 1.0f); }")

    def program(pasted: bool):
        @T.prim_func
        def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                if pasted:
                    T.import_source(src)
                for i in T.Parallel(64):
                    if pasted:
                        Y[i] = T.call_extern("float32", "tc_test_norm", X[i], 2.0)
                    else:
                        Y[i] = T.call_extern("float32", "expf", X[i])
        return main

    x = torch.randn(64)
    y = torch.empty(64)
    tilelang.compile(program(True), target="cpu")(x, y)
    torch.testing.assert_close(y, torch.sqrt(x * x + 4))
    tilelang.compile(program(False), target="cpu")(x, y)
    torch.testing.assert_close(y, torch.exp(x))


@pytest.mark.cuda_compile
def test_extern_shared_writes_and_reads_are_ordered_by_barriers():
    src = tilelang.compile(shared_extern_program(), target=SM80).get_kernel_source()
    body = src[src.index("__global__"):]
    fill, sum_ = body.index("tc_test_fill("), body.index("tc_test_sum(")
    first_read = body.index("s[", fill + len("tc_test_fill((&s[0])"))
    assert "__syncthreads()" in body[fill:first_read], body   # the extern's writes, before T.copy reads s
    x_write = body.rindex("x[", 0, sum_)
    assert "__syncthreads()" in body[x_write:sum_], body       # T.copy's writes of x, before the extern reads it
    assert "tc_test_twice(" in body


def test_access_ptr_offset_counts_row_major_elements():
    src = "static inline void tc_test_put(float* p, float v) { p[0] = v; }"

    @T.prim_func
    def main(Out: T.Tensor((2, 4), "float32")):
        with T.Kernel(1, threads=32) as bx:
            w = T.alloc_local((2, 4), "float32")
            T.import_source(src)
            for i, j in T.grid(2, 4):
                w[i, j] = 0.0
            T.call_extern("handle", "tc_test_put", T.access_ptr(w[0, 3], "w", offset=2), 7.0)  # -> w[1, 1]
            for i, j in T.grid(2, 4):
                Out[i, j] = w[i, j]
    out = torch.empty(2, 4)
    tilelang.compile(main, target="cpu")(out)
    expect = torch.zeros(2, 4)
    expect[1, 1] = 7.0
    assert torch.equal(out, expect)
