"""Running compiled kernels: CUDA driver glue (and, from other modules, kernel objects)."""
from .cuda_driver import (ArgPacker, CudaError, CudaFunction, CudaModule, DeviceProperties,
                          check, device_properties, ensure_context)

__all__ = ["ArgPacker", "CudaError", "CudaFunction", "CudaModule", "DeviceProperties", "check",
           "device_properties", "ensure_context"]
