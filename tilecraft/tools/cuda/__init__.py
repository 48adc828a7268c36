"""`tilelang.tools.cuda`: TileLang's CUDA tools.  Its `iket` (in-kernel event tracing: marks and
ranges recorded by the kernel and written as trace files) has no counterpart in tilecraft."""


def __getattr__(name):
    if name == "iket":
        raise ImportError("tilelang.tools.cuda.iket (TileLang's in-kernel event tracer) is not offered by "
                          "tilecraft: kernels cannot record trace events; time them with "
                          "tilelang.profiler.do_bench or kernel.get_profiler()", name="tilelang.tools.cuda.iket")
    raise AttributeError(f"module 'tilecraft.tools.cuda' has no attribute {name!r}")
