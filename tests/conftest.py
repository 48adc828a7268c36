"""Shared test setup.

- Every test gets torch seeded from its node id, so a failure reproduces with the same inputs
  when the test is re-run alone (and different tests still see different data).
- Tests marked `gpu` are skipped when torch has no CUDA device (the CI has none).
The `gpu`/`slow` markers themselves are registered in pyproject.toml.
"""
from __future__ import annotations

import zlib

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    has_cuda = None
    for item in items:
        if "gpu" in item.keywords:
            if has_cuda is None:
                has_cuda = _cuda_available()
            if not has_cuda:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)"))


@pytest.fixture(autouse=True)
def _seed_torch_from_node_id(request):
    """Seed torch (and Python's random) from the test's node id: stable per test, distinct across tests."""
    seed = zlib.crc32(request.node.nodeid.encode()) & 0x7FFFFFFF
    try:
        import torch
        torch.manual_seed(seed)
    except ImportError:
        pass
    import random
    random.seed(seed)
    yield seed
