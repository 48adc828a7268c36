"""`from tilelang import tvm`: tilecraft is a pure-Python compiler with its own IR, so TVM itself is not
offered.  The few names kernel programs take from it for bookkeeping work (`tvm.DataType`,
`tvm.tir.const`, `tvm.tir.IntImm` / `FloatImm`, `tvm.testing.main`); anything else is an
`AttributeError` that says what tilecraft offers instead.  (Programs that build or transform TVM IR
-- `tvm.IRModule`, `tvm.tir.transform.*`, `tvm.ir.assert_structural_equal` -- have no counterpart.)
"""
from __future__ import annotations

import sys
import types

from .ir import dtype as _dt

_WHY = ("TVM is not part of tilecraft (a pure-Python compiler with its own IR); "
        "`{name}` has no counterpart. Kernels are written with tilelang.language (T.*); "
        "kernel.get_kernel_source() shows the generated code")


class _Namespace(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(_WHY.format(name=f"{self.__name__.replace('tilecraft.', '')}.{name}"))


def _const(value, dtype=None, span=None):
    """`tvm.tir.const(value, dtype)`: a typed constant (int32 / float32 when no dtype is given)."""
    from .ir.expr import const
    if dtype is None:
        dtype = _dt.bool_ if isinstance(value, bool) else _dt.int32 if isinstance(value, int) else _dt.float32
    return const(value, _dt.dtype(dtype), span)


def _imm(kind):
    def make(dtype, value, span=None):
        return _const(kind(value), dtype, span)
    return make


def _testing_main():
    """`tvm.testing.main()`: run this file's tests with pytest (as tilelang.testing.main does)."""
    import pytest
    sys.exit(pytest.main([sys.modules["__main__"].__file__] + sys.argv[1:]))


tir = _Namespace("tilecraft.tvm.tir")
tir.const = _const
tir.IntImm = _imm(int)
tir.FloatImm = _imm(float)
testing = _Namespace("tilecraft.tvm.testing")
testing.main = _testing_main
DataType = _dt.dtype


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(_WHY.format(name=f"tvm.{name}"))
