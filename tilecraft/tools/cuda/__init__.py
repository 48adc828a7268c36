"""`tilelang.tools.cuda`: TileLang's CUDA tools.  Its `iket` (in-kernel event tracing: marks and
ranges recorded by the kernel and written as trace files) is tools/cuda/iket.py; kernels with events
run on the CPU target (the CUDA target refuses them, naming the CPU target)."""
