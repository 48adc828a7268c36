"""`tilelang.carver.arch`: device queries (`driver.get_num_sms()`, ...)."""
from . import driver

__all__ = ["driver"]
