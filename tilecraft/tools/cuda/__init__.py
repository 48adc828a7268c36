"""`tilelang.tools.cuda`: TileLang's CUDA tools.  Its `iket` (in-kernel event tracing: marks and
ranges recorded by the kernel and written as trace files) is tools/cuda/iket.py; kernels with events
record them on the CPU target (per block) and on the CUDA target (per warp, as TileLang's IKET)."""
