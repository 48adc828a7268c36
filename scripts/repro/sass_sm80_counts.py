"""Count the SASS instructions (by opcode) of four reference kernels compiled for sm_80 from the checkout
named on the command line: python scripts/repro/sass_sm80_counts.py <checkout root>  (needs NVRTC + cuobjdump)."""
import sys, collections, re
sys.path.insert(0, sys.argv[1])
import tilecraft as tl
from tilecraft.kernels.gemm import matmul, matmul_bias_gelu
from tilecraft.kernels.attention import flash_attention
out = {}
for name, f in [("gemm readme", matmul.get_tir(4096,4096,4096)), ("gemm 128x256", matmul.get_tir(4096,4096,4096,128,256,64,3,256)),
                ("gelu", matmul_bias_gelu.get_tir(8192,8192,2048,128,128,64,3,256)),
                ("fa d128", flash_attention.get_tir(4,16,4096,128,is_causal=False,block_M=128,block_N=128,num_stages=2,threads=256))]:
    k = tl.compile(f, out_idx=[-1], target={"kind":"cuda","arch":"sm_80"})
    sass = k.get_sass()
    ins = [l for l in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", l)]
    ops = collections.Counter(re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", l).split(" ")[0].split(".")[0] for l in ins)
    print(name, len(ins), dict(sorted((k2, v) for k2, v in ops.items() if k2 in ("HMMA","LDGSTS","LDSM","IMAD","IADD3","LEA","STS","STG","LDS","BAR","SHF","LOP3"))))
