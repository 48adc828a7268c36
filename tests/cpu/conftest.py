"""Every CPU-tier program runs on every target (issue 3), without duplicating test code.

A test that compiles a kernel takes the `build` fixture (and `device` for its tensors); `build`
depends on `target`, so the test is collected once per target:

- ``cpu``: compiled for the CPU and checked against torch (the reference semantics);
- ``cuda``: compiled for the local GPU and checked against torch on it.  Marked `gpu`: without a
  GPU the root conftest skips it at collection, so it costs no set-up and no compile;
- ``cuda-compile``: generated and compiled (NVRTC) for sm_90a, no GPU needed, and the test ends
  there as a PASS (marker `cuda_compile`: skipped only where NVRTC is missing): the CI's signal
  that every CPU-tier program compiles for CUDA.  `build` raises `CompiledOnly`, which the
  report hook below turns into a pass: what ran (a compile) succeeded, and nothing was skipped.

`build(factory, *args, **kwargs)` takes a `@tilelang.jit` factory (the test module's own, or one of
`tilecraft.kernels`) and compiles ``factory.fn(*args, **kwargs)`` for the test's target with the
factory's `out_idx`; kernels are shared between tests by (factory, arguments, target).

What CUDA does not support must be refused with a clear error, never answered wrongly:

- ``if build.rejects_on_cuda(match, factory, *args): return`` -- on a CUDA target, assert that
  compiling raises a TilecraftError matching `match` (the test then ends); on the CPU, False.
- ``@pytest.mark.cuda_gap(reason, raises=...)`` -- a known compiler gap (an unclear error, a
  failing compile): the CUDA params become strict xfails restricted to `raises`, and the
  compile-only param fails once the program compiles, so the mark is removed with the fix.
- ``@pytest.mark.cuda_gap(reason, wrong_answer=True)`` -- compiles, but the GPU computes a wrong
  result: only the ``cuda`` param is a strict xfail (raises=AssertionError); ``cuda-compile``
  still compiles it as usual.
"""
from __future__ import annotations

import pytest

import tilecraft as tilelang
from tilecraft.errors import TilecraftError
from tilecraft.jit import JITFactory

CUDA_COMPILE_TARGET = {"kind": "cuda", "arch": "sm_90a"}
TARGETS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu), pytest.param("cuda-compile", marks=pytest.mark.cuda_compile)]
_RESOLVED = {"cpu": "cpu", "cuda": "cuda", "cuda-compile": CUDA_COMPILE_TARGET}  # "cuda": the local GPU's arch

_KERNELS: dict = {}


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda_gap(reason, raises=TilecraftError, wrong_answer=False): a CPU-tier "
                                       "program the CUDA target cannot compile or run right yet (strict xfail on "
                                       "the CUDA params; see tests/cpu/conftest.py)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        gap = item.get_closest_marker("cuda_gap")
        callspec = getattr(item, "callspec", None)
        target = callspec.params.get("target", "cpu") if callspec is not None else "cpu"
        if gap is None or target == "cpu":
            continue
        if gap.kwargs.get("wrong_answer"):
            if target == "cuda":
                item.add_marker(pytest.mark.xfail(strict=True, raises=AssertionError,
                                                  reason="wrong answer on the GPU: " + _gap_reason(gap)))
            continue
        item.add_marker(pytest.mark.xfail(strict=True, reason=_gap_reason(gap),
                                          raises=gap.kwargs.get("raises", TilecraftError)))


class CompiledOnly(Exception):
    """Raised by `build` on the ``cuda-compile`` target once the kernel compiled: the test is done."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item, call):
    """A phase that ended in CompiledOnly is reported as one that raised nothing: a pass.  The exception is
    dropped before the report is made, not its failure text replaced after: pytest would first format
    it as a failure, reading and parsing the source of every frame (~20 ms, 377 tests a run)."""
    if call.excinfo is not None and call.excinfo.errisinstance(CompiledOnly):
        call.excinfo = None
        if call.when == "setup":   # `build` in a fixture: the test body has nothing left to run
            item._tc_compiled_only = True


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if getattr(pyfuncitem, "_tc_compiled_only", False):
        return True


def _gap_reason(mark) -> str:
    return mark.kwargs.get("reason") or (mark.args[0] if mark.args else "known CUDA gap")


def compile_for(target: str, factory: JITFactory, *args, **kwargs):
    """The kernel of `factory(*args, **kwargs)` compiled for `target` (a name from TARGETS)."""
    key = (factory, factory._key(args, kwargs), target)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kw = factory.compile_kwargs
        kernel = tilelang.compile(factory.fn(*args, **kwargs), out_idx=kw["out_idx"],
                                  target=_RESOLVED[target], pass_configs=kw["pass_configs"])
        _KERNELS[key] = kernel
    return kernel


class Build:
    def __init__(self, target: str, node):
        self.target = target
        self.node = node

    def __call__(self, factory: JITFactory, *args, **kwargs):
        """The kernel for this test's target.  For ``cuda-compile`` the kernel is compiled and the
        test ends as a pass (there is nothing to run it on); a compile error fails the test."""
        kernel = compile_for(self.target, factory, *args, **kwargs)
        if self.target == "cuda-compile":
            gap = self.node.get_closest_marker("cuda_gap")
            if gap is not None and not gap.kwargs.get("wrong_answer"):
                raise AssertionError(f"{factory.__name__} compiles for {CUDA_COMPILE_TARGET['arch']} now: "
                                     f"remove the cuda_gap mark ({_gap_reason(gap)})")
            raise CompiledOnly(f"compiled for {CUDA_COMPILE_TARGET['arch']}; runs only on a GPU")
        return kernel

    def rejects_on_cuda(self, match: str, factory: JITFactory, *args, **kwargs) -> bool:
        """On a CUDA target: assert that compiling raises a TilecraftError matching `match` and
        return True (the test has nothing left to run).  On the CPU: False."""
        if self.target == "cpu":
            return False
        with pytest.raises(TilecraftError, match=match):
            compile_for(self.target, factory, *args, **kwargs)
        return True


@pytest.fixture(params=TARGETS)
def target(request) -> str:
    return request.param


@pytest.fixture
def device(target) -> str:
    """Where a test's tensors live: the GPU for ``cuda``, else the CPU."""
    return "cuda" if target == "cuda" else "cpu"


@pytest.fixture
def build(target, request) -> Build:
    return Build(target, request.node)
