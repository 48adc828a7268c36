"""`tilelang.carver`: device queries (`carver.arch`) and a small GEMM tiling search with TileLang's
interface (`carver.template.MatmulTemplate`, hint objects in `carver.roller`)."""
