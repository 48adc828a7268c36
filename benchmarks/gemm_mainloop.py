"""The mma.sync GEMM main loop: what do the copies' address instructions cost?

  v8 source      the kernel as generated before the stage offsets were split out of the swizzle
                 (benchmarks/results/probes/sources/v8_*.cu): ~160 non-mma instructions per k-tile
  as generated   stage * slice + swizzle(row in stage): the swizzled part is loop-invariant (~100)

Every variant is checked against torch.  Results and a variant that was tried and dropped (the
copies spread over the gemm's k16 steps) are in benchmarks/NOTES.md, v9.

    PYTHONPATH=. python3 benchmarks/gemm_mainloop.py
"""
from __future__ import annotations

import pathlib

import torch

import tilecraft
import tilecraft.kernels as K
from tilecraft.compiler import compile_cuda_nvrtc
from tilecraft.profiler import do_bench
from tilecraft.runtime.cuda_driver import CudaModule

N = 4096
SOURCES = pathlib.Path(__file__).parent / "results" / "probes" / "sources"
CONFIGS = ((128, 256, 64, 3, 256), (128, 128, 64, 3, 128), (128, 128, 32, 4, 128))


def main():
    a = torch.randn(N, N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, N, device="cuda", dtype=torch.float16)
    c = torch.empty(N, N, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    stream = torch.cuda.current_stream().cuda_stream
    ms = do_bench(lambda: a @ b, return_mode="median")
    print(f"cuBLAS: {2 * N**3 / ms / 1e9:.0f} TFLOP/s", flush=True)
    for bm, bn, bk, st, th in CONFIGS:
        f = K.matmul.__wrapped__(N, N, N, block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th)
        k = tilecraft.compile(f, out_idx=[-1], target="cuda -arch=sm_90a")
        meta = k.artifact.meta
        grid, smem = tuple(meta["grid"]), int(meta.get("smem_bytes", 0))
        src = k.get_kernel_source()
        vs = {"as generated": src}
        old = SOURCES / f"v8_gemm_{bm}x{bn}x{bk}_{st}_{th}.cu"
        if old.exists():
            vs = {"v8 source": old.read_text(), **vs}
        for name, text in vs.items():
            mod = CudaModule(compile_cuda_nvrtc(text, "sm_90a", include_dirs=[tilecraft.include_dir()]).cubin)
            fn = mod.function(meta.get("kernel_name", "main_kernel"))
            args = [("ptr", a.data_ptr()), ("ptr", b.data_ptr()), ("ptr", c.data_ptr())]
            c.fill_(float("nan"))
            fn.launch(grid, (th, 1, 1), smem, stream, args)
            err = ((c.float() - ref).norm() / ref.norm()).item()
            times = [do_bench(lambda: fn.launch(grid, (th, 1, 1), smem, stream, args), return_mode="median")
                     for _ in range(2)]
            ms = min(times)
            print(f"{bm}x{bn}x{bk}/{st}/{th:<4} {name:<14} {ms * 1e3:8.1f} us {2 * N**3 / ms / 1e9:6.0f} TFLOP/s"
                  f"  rel err {err:.1e} {'PASS' if err < 1e-2 else 'FAIL'}", flush=True)
        ms = do_bench(lambda: a @ b, return_mode="median")
        print(f"cuBLAS again: {2 * N**3 / ms / 1e9:.0f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
