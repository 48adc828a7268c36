"""CI's slice of TileLang's current example corpus (../shared/tilelang-examples-head, TileLang's main
branch): a fixed subset of its programs, written for CUDA, each run unchanged in CPU mode
(`tilecraft run --cpu prog.py`, in its own folder, in a fresh process with a time limit: tests/fresh_python.py's
`run_python`, which forks it from a process with torch imported) must exit 0 --
the programs check their own results against torch.  The subset is programs that pass quickly on
a 2-core machine; the whole corpus is `scripts/compat_check.sh --cpu head` (tables under
benchmarks/results/)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fresh_python import run_python  # tests/: a fresh process without paying `import torch`

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "..", "shared", "tilelang-examples-head")
TIMEOUT_S = 300   # per program; each takes seconds to tens of seconds alone on the CI machine

# (program, CPU seconds measured alone with a cold kernel cache: user + sys, compiles included);
# none needs triton or einops.  About 3 minutes in all.
PROGRAMS = [
    ("analyze/example_gemm_analyze.py", 3.3),
    ("analyze/example_conv_analyze.py", 3.4),
    ("autodd/tilelang_minimized_expected.py", 3.4),
    ("elementwise/regression_example_elementwise.py", 5.5),
    ("blocksparse_gemm/regression_example_blocksparse_gemm.py", 5.6),
    ("elementwise/example_elementwise_add.py", 5.8),
    ("visual_layout_inference/visual_layout_inference.py", 5.8),
    ("cast/regression_example_cast.py", 6.0),
    ("gemm_fp8/example_tilelang_gemm_fp8.py", 7.1),
    ("gemm_streamk/example_tilelang_gemm_streamk.py", 6.4),
    ("deepseek_mhc/example_mhc_post.py", 8.6),
    ("gemm_splitk/example_tilelang_gemm_splitk.py", 9.4),
    ("gemm_splitk/example_tilelang_gemm_splitk_vectorize_atomicadd.py", 9.7),
    ("gemm/example_gemm.py", 10.4),
    ("gemm_int4/example_tilelang_gemm_int4.py", 10.7),
    ("topk/example_topk.py", 11.1),
    ("dsa_hisa/fp8_block_mean_pooling.py", 13.4),
    ("norm/rms_norm.py", 12.7),
    ("norm/layernorm.py", 13.7),
    ("cast/example_group_per_split_token_cast_to_fp8.py", 15.3),
    ("blocksparse_gemm/example_blocksparse_gemm.py", 16.0),
]


@pytest.mark.cxx
@pytest.mark.parametrize("program", [p for p, _ in PROGRAMS])
def test_corpus_program_runs_in_cpu_mode(program):
    path = os.path.join(CORPUS, "examples", program)
    if not os.path.isdir(CORPUS):
        pytest.skip(f"the corpus {os.path.normpath(CORPUS)} is absent (it sits in shared/ beside the repository)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILECRAFT_ALSO_COMPILE")}
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        r = run_python([sys.executable, "-m", "tilecraft", "run", "--cpu", os.path.basename(path)],
                       cwd=os.path.dirname(path), env=env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        tail = (e.stdout or b"")[-2000:] if isinstance(e.stdout, bytes) else (e.stdout or "")[-2000:]
        pytest.fail(f"{program}: still running after {TIMEOUT_S} s; last output:\n{tail}")
    assert r.returncode == 0, f"{program} exited {r.returncode}:\n{(r.stdout + r.stderr)[-4000:]}"
