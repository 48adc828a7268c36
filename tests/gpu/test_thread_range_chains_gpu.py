"""`if`/`elif` chains on the thread index whose later branches are reached by non-contiguous threads
(TileLang's sm100 FlashAttention roles: [128, 160), [160, 192), [0, 128)) on the GPU against torch,
repeated (CPU reference and compile-only checks: tests/cpu/test_thread_range_chains.py)."""
from __future__ import annotations

import os
import sys

import pytest

import tilecraft as tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from test_thread_range_chains import chain, check_chain  # noqa: E402

pytestmark = pytest.mark.gpu


def test_elif_chain_over_non_contiguous_threads_on_gpu():
    k = tilelang.compile(chain(), target="cuda")
    for _ in range(10):
        check_chain(k, device="cuda")
