"""Reference kernels written in the tile language, exactly as a user would write them.

They serve the demo (`tilecraft demo`), the benchmark suite and the tests; each module also
has a torch reference (`ref_*`) to check against.
"""
from .elementwise import vector_add, axpby, ref_vector_add, ref_axpby
from .gemm import matmul, matmul_bias_gelu, splitk_matmul, ref_matmul, ref_matmul_bias_gelu
from .norm import softmax, rmsnorm, ref_softmax, ref_rmsnorm
from .attention import flash_attention, ref_attention
from .attention_bwd import (flash_attention_fwd_lse, flash_attention_bwd_preprocess, flash_attention_bwd,
                            flash_attention_bwd_postprocess, flash_attention_backward, ref_attention_backward)
from .gemm_fp8 import fp8_matmul, fp8_matmul_blockscaled, ref_fp8_matmul, ref_fp8_matmul_blockscaled
from .decode import gqa_decode_split, mla_decode_split, decode_combine, gqa_decode, mla_decode
from .grouped_gemm import grouped_matmul, ref_grouped_gemm  # not grouped_gemm(): it would hide the module
