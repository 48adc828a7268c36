"""`tilelang.cuda`: CUDA-specific helpers TileLang programs import (`intrinsics.sparse_layout`)."""
