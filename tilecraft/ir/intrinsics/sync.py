"""Fences (device/include/tilecraft/gemm_sm90.h)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Effects, Intrinsic


@dataclass(frozen=True)
class FenceProxyAsyncShared(Intrinsic):
    """Order this thread's generic-proxy (and completed cp.async) shared-memory writes before
    later async-proxy reads (wgmma, TMA store); a block barrier must follow for other threads."""
    entry = "tc::fence_proxy_async_shared"
    family = "fence"
    effects = Effects(fences="generic -> async proxy (shared memory)")
