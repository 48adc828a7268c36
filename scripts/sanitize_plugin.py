"""pytest plugin for scripts/sanitize.sh: records the name of every CUDA kernel the tests load
(tilecraft kernels and the header tests' hand-written ones alike) into the file named by
TILECRAFT_SANITIZE_KERNELS, so the report can list the kernels that ran clean, not only those
with findings."""
from __future__ import annotations

import os

_NAMES: set = set()


def pytest_configure(config):
    from tilecraft.runtime import cuda_driver
    original = cuda_driver.CudaModule.function

    def function(self, name, *a, **kw):
        _NAMES.add(name)
        return original(self, name, *a, **kw)
    cuda_driver.CudaModule.function = function


def pytest_unconfigure(config):
    path = os.environ.get("TILECRAFT_SANITIZE_KERNELS")
    if path:
        with open(path, "w") as f:
            f.write("".join(n + "\n" for n in sorted(_NAMES)))
