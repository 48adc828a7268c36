"""Reference kernels written in the tile language, exactly as a user would write them.

They serve the demo (`tilecraft demo`), the benchmark suite and the tests; each module also
has a torch reference (`ref_*`) to check against.
"""
from .elementwise import vector_add, axpby, ref_vector_add, ref_axpby
from .gemm import matmul, matmul_bias_gelu, splitk_matmul, ref_matmul, ref_matmul_bias_gelu
from .norm import softmax, rmsnorm, ref_softmax, ref_rmsnorm
from .attention import flash_attention, ref_attention
