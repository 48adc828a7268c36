"""`tilelang.carver.arch`: device queries (`driver.get_num_sms()`, ...) and the device descriptions a
carver template takes (`CUDA("cuda")`; `CDNA("hip")` is accepted and described, but tilecraft
compiles for NVIDIA GPUs only)."""
from . import driver


class CUDA:
    """The current CUDA device (its properties read lazily through torch, defaults without a GPU)."""

    def __init__(self, target="cuda", device_id: int = 0):
        self.target, self.device_id = target, device_id

    def _get(self, fn, default):
        try:
            return fn(self.device_id)
        except RuntimeError:
            return default

    @property
    def compute_max_core(self) -> int:
        return self._get(driver.get_num_sms, 132)

    @property
    def smem_cap(self) -> int:
        return self._get(driver.get_max_dynamic_shared_size_bytes, 232448)

    def __repr__(self):
        return f"CUDA({self.target!r})"


class CDNA(CUDA):
    def __repr__(self):
        return f"CDNA({self.target!r})"


__all__ = ["driver", "CUDA", "CDNA"]
