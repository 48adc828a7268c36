"""`import tilelang[.X]` answered by `tilecraft[.X]`: the same module objects, not copies.

A meta-path finder placed first on `sys.meta_path`.  For the name `tilelang` or `tilelang.X` it
hands Python a spec whose loader, when asked to execute the module, imports `tilecraft.X` and puts
*that* module object into `sys.modules["tilelang.X"]`; Python's import machinery then returns
whatever `sys.modules` holds.  So `tilelang.jit is tilecraft.jit`, `isinstance` checks agree across
both spellings, and module-level state (caches, registries) exists once.

Nothing named `tilelang` is installed on disk: a real TileLang installed beside tilecraft stays
importable in processes that do not call `install()`.  A submodule tilecraft does not provide
(`tilelang.carver`, `tilelang.contrib`) is a `ModuleNotFoundError` that says so.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

ALIAS = "tilelang"
TARGET = "tilecraft"


# TileLang module paths whose tilecraft counterpart lives elsewhere (`tilecraft.jit` is a module,
# not a package, so its `diagnostics` cannot nest under it).
REDIRECTS = {"tilelang.jit.diagnostics": "tilecraft.jit_diagnostics"}


def target_name(name: str) -> str:
    """`tilelang.utils.tensor` -> `tilecraft.utils.tensor`."""
    return REDIRECTS.get(name) or TARGET + name[len(ALIAS):]


class AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `tilelang[.X]` and loads it as the module object `tilecraft[.X]`."""

    def find_spec(self, name, path=None, target=None):
        if name == ALIAS or name.startswith(ALIAS + "."):
            return importlib.util.spec_from_loader(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return None  # a placeholder; exec_module swaps in the real module

    def exec_module(self, module):
        name = module.__name__
        real = target_name(name)
        try:
            target = importlib.import_module(real)
        except ModuleNotFoundError as e:
            if e.name is not None and (e.name == real or real.startswith(e.name + ".")):
                sys.modules.pop(name, None)
                raise ModuleNotFoundError(
                    f"No module named {name!r}: tilecraft answers `import tilelang...` with its own "
                    f"modules and has no {real!r}", name=name) from None
            raise
        sys.modules[name] = target
        if name == ALIAS:
            _register_redirect_parents()

    def __repr__(self):
        return f"<tilecraft alias finder: {ALIAS}[.X] -> {TARGET}[.X]>"


def _register_redirect_parents() -> None:
    """`tilelang.jit` (the parent of a redirected name) as a module with an empty package path, put
    into `sys.modules` before any `import tilelang.jit.diagnostics`: Python then finds it there and
    does not set the attribute `tilelang.jit` -- the `jit` decorator -- to the module, and only this
    finder (REDIRECTS) can answer for its children."""
    for redirected in REDIRECTS:
        parent = redirected.rsplit(".", 1)[0]
        if parent in sys.modules:
            continue
        module = importlib.import_module(target_name(parent))
        if not hasattr(module, "__path__"):
            module.__path__ = []
        sys.modules[parent] = module


def installed() -> bool:
    return any(isinstance(f, AliasFinder) for f in sys.meta_path)


def install() -> None:
    """Answer every later `import tilelang[.X]` in this process with `tilecraft[.X]` (idempotent).

    Modules already imported under `tilelang` are left alone: if a real TileLang was imported first
    it keeps running (mixing the two in one process is refused by `check_no_real_tilelang`)."""
    check_no_real_tilelang()
    if not installed():
        sys.meta_path.insert(0, AliasFinder())


def uninstall() -> None:
    """Remove the finder and the `tilelang[.X]` entries it put into `sys.modules`."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, AliasFinder)]
    for name in [n for n in sys.modules if n == ALIAS or n.startswith(ALIAS + ".")]:
        mod = sys.modules[name]
        if getattr(mod, "__name__", "").startswith(TARGET):
            del sys.modules[name]


def check_no_real_tilelang() -> None:
    mod = sys.modules.get(ALIAS)
    if mod is not None and not getattr(mod, "__name__", "").startswith(TARGET):
        raise ImportError(f"a real TileLang ({getattr(mod, '__file__', mod)!r}) is already imported in "
                          f"this process; call tilecraft.compat.install() before any `import tilelang`")
