"""`tilelang.cuda.intrinsics`: layout metadata of CUDA instructions (`sparse_layout`)."""
