"""Where does the mma.sync GEMM's time go?  The generated 4096^3 kernel, timed as generated and
with one part taken out at a time (the variants compute wrong results on purpose; only their
time matters):

  no pipeline barrier   the cp.async wait + __syncthreads inside the main loop removed
  L2-resident loads     every k-step loads k-tile 0 again (the same bytes: L2 hits, no DRAM)
  no loads in loop      the main loop's cp.async copies removed (mmas + barrier only)
  no mma                the gemm removed (copies + barrier only)
  no epilogue           C never stored (the accumulators still computed)
  panel P               T.use_swizzle rasterization with P block rows per panel (generated: 10)
  cp.async L2::NB       the 16-byte copies with an L2 prefetch-size hint
  mbarrier pipeline     (correct, checked) the generator's per-stage mbarrier form
                        (pass_configs tc.mbarrier_pipeline, see transform/pipeline_copies.py)

    PYTHONPATH=. python3 benchmarks/gemm_anatomy.py
"""
from __future__ import annotations

import re

import torch

import tilecraft
import tilecraft.kernels as K
from tilecraft.compiler import compile_cuda_nvrtc
from tilecraft.profiler import do_bench
from tilecraft.runtime.cuda_driver import CudaModule

N = 4096


HINTED_COPY = r"""
template <int N>
__device__ __forceinline__ void hinted_cp16(void* smem, const void* gmem, bool pred) {
  asm volatile("cp.async.cg.shared.global.L2::%3B [%0], [%1], 16, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(smem)),
               "l"(gmem), "r"(pred ? 16 : 0), "n"(N) : "memory");
}
"""


def extra_variants(src: str) -> dict:
    head = src.index("extern \"C\"")
    out = {"no epilogue": src.replace("tc::vec_store<", "if (C == nullptr) tc::vec_store<")}
    for p in (4, 8, 16, 32):
        out[f"panel {p}"] = src.replace("const int tc_panel = 10;", f"const int tc_panel = {p};")
    for nb in (128, 256):
        out[f"cp.async L2::{nb}B"] = (src[:head] + HINTED_COPY + src[head:]).replace(
            "tc::cp_async_pipelined_zfill<16>(", f"hinted_cp16<{nb}>(")
    return out


def variants(src: str, stages: int, bk: int) -> dict:
    gemm = re.search(r"tc::gemm_ss<[^;]*;", src).group(0)
    ahead = f"(ko + {stages - 1})"
    loop_if = f"if (({ahead} < {N // bk}))"
    assert ahead in src and loop_if in src and "tc::PipelineBarrier" in gemm, "kernel shape changed"
    return {
        "as generated": src,
        "no pipeline barrier": src.replace(re.search(r", tc::PipelineBarrier<\d+>\(\)", gemm).group(0), ""),
        "L2-resident loads": src.replace(f"({ahead} * {bk})", f"(0 * {bk})"),
        "no loads in loop": src.replace(loop_if, f"if (false && {ahead} < 0)"),
        "no mma": src.replace(gemm, re.search(r"tc::PipelineBarrier<\d+>\(\)", gemm).group(0) + "();"),
    }


def main():
    a = torch.randn(N, N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, N, device="cuda", dtype=torch.float16)
    c = torch.empty(N, N, device="cuda", dtype=torch.float16)
    stream = torch.cuda.current_stream().cuda_stream
    ms = do_bench(lambda: a @ b, return_mode="median")
    print(f"cuBLAS: {2 * N**3 / ms / 1e9:.0f} TFLOP/s")
    for bm, bn, bk, st, th in ((128, 128, 64, 3, 128), (128, 256, 64, 3, 256), (128, 128, 64, 3, 256)):
        f = K.matmul.__wrapped__(N, N, N, block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th)
        k = tilecraft.compile(f, out_idx=[-1], target="cuda -arch=sm_90a")
        meta = k.artifact.meta
        grid, base_smem = tuple(meta["grid"]), int(meta.get("smem_bytes", 0))
        vs = {name: (src, base_smem) for name, src in variants(k.get_kernel_source(), st, bk).items()}
        if th == 128:
            vs.update({name: (src, base_smem) for name, src in extra_variants(k.get_kernel_source()).items()})
        mb = tilecraft.compile(f, out_idx=[-1], target="cuda -arch=sm_90a", pass_configs={"tc.mbarrier_pipeline": True})
        vs["mbarrier pipeline"] = (mb.get_kernel_source(), int(mb.artifact.meta.get("smem_bytes", 0)))
        ref = (a.float() @ b.float())
        for name, (src, smem) in vs.items():
            mod = CudaModule(compile_cuda_nvrtc(src, "sm_90a", include_dirs=[tilecraft.include_dir()]).cubin)
            fn = mod.function(meta.get("kernel_name", "main_kernel"))
            args = [("ptr", a.data_ptr()), ("ptr", b.data_ptr()), ("ptr", c.data_ptr())]
            ms = do_bench(lambda: fn.launch(grid, (th, 1, 1), smem, stream, args), return_mode="median")
            check = ""
            if name in ("as generated", "mbarrier pipeline"):
                c.fill_(float("nan"))
                fn.launch(grid, (th, 1, 1), smem, stream, args)
                err = ((c.float() - ref).norm() / ref.norm()).item()
                check = f"  rel err {err:.1e} {'PASS' if err < 1e-2 else 'FAIL'}"
            print(f"{bm}x{bn}x{bk}/{st}/{th:<4} {name:<22} {ms * 1e3:8.1f} us {2 * N**3 / ms / 1e9:6.0f} TFLOP/s"
                  + check, flush=True)


if __name__ == "__main__":
    main()
