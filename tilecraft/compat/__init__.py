"""Running TileLang programs unchanged.

One line in a notebook or a test, before the program's own imports::

    import tilecraft.compat; tilecraft.compat.install()   # now `import tilelang` is tilecraft

From the shell: ``tilecraft run prog.py [args]`` (or ``python -m tilecraft run ...``).
No package named ``tilelang`` is installed: it would shadow a real TileLang.
"""
from .alias import AliasFinder, install, installed, uninstall
from .run import run_module, run_program

__all__ = ["AliasFinder", "install", "installed", "uninstall", "run_program", "run_module"]
