"""The package's layers import downward only (README, "Where things live"): the compiler's core -- the
IR (`tilecraft/ir`), the passes (`tilecraft/transform`), the printers (`tilecraft/codegen`) and what
they share (`options.py`, `launch.py`, `registry.py`) -- never reaches up into the build driver,
the runtime, the JIT front end, the autotuner or the profiler, not even through a chain of other
modules or an import inside a function.  `pass_configs` therefore reach the passes only as the
typed `Options` of their `PassContext`, and a loop's plan only as the IR the passes hand on.

Read from the source (every `import` statement, function-level ones included), not from
`sys.modules`: `import tilecraft` loads every layer, so only the source shows who needs whom."""
from __future__ import annotations

import ast
import collections
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "tilecraft"

CORE = ("tilecraft.ir", "tilecraft.transform", "tilecraft.codegen", "tilecraft.options", "tilecraft.launch",
        "tilecraft.registry")
ABOVE = ("tilecraft.compiler", "tilecraft.runtime", "tilecraft.jit", "tilecraft.autotuner", "tilecraft.profiler",
         "tilecraft.cli", "tilecraft.engine", "tilecraft.compat")


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set) -> set:
    """The tilecraft modules `path` imports (a `from pkg import name` counts `pkg.name` when that is a module)."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}
    return {m for m in found if m in modules}


def _graph() -> dict:
    paths = {_module(p): p for p in PACKAGE.rglob("*.py")}
    return {m: _imports(p, set(paths)) for m, p in paths.items()}


def _chain(graph: dict, start: str, bad) -> list | None:
    """The import chain from `start` to the first module `bad(module)` accepts, or None."""
    parent = {start: None}
    queue = collections.deque([start])
    while queue:
        m = queue.popleft()
        for dep in sorted(graph[m]):
            if dep in parent:
                continue
            parent[dep] = m
            if bad(m, dep):
                chain = [dep]
                while chain[-1] != start:
                    chain.append(parent[chain[-1]])
                return chain[::-1]
            queue.append(dep)
    return None


def test_the_compiler_core_never_imports_the_layers_above_it():
    graph = _graph()
    core = [m for m in graph if m.startswith(CORE)]
    assert "tilecraft.transform.pipeline" in core and "tilecraft.ir.loop_plan" in core   # the scan sees the tree
    climbs = {m: _chain(graph, m, lambda _src, dep: dep.startswith(ABOVE)) for m in core}
    assert {m: " -> ".join(c) for m, c in climbs.items() if c} == {}


def test_the_ir_and_the_passes_never_read_the_language_surface():
    """They sit below it: what the language hands them travels as IR (a layout request is an IR
    value, ir/stmt.SwizzledLayout; the parser's pending name reaches ir/dtype.py through the hook
    the parser installs, ir.dtype.use_pending_name)."""
    graph = _graph()
    reads = {(m, dep) for m, deps in graph.items() if m.startswith(("tilecraft.ir", "tilecraft.transform"))
             for dep in deps if dep.startswith("tilecraft.language")}
    assert reads == set()


def test_the_scan_finds_a_climb():
    """The checks above can fail: a function-level import two modules away is found."""
    graph = {"tilecraft.transform.a": {"tilecraft.ir.b"}, "tilecraft.ir.b": {"tilecraft.runtime.kernel"},
             "tilecraft.runtime.kernel": set()}
    assert _chain(graph, "tilecraft.transform.a", lambda _s, d: d.startswith(ABOVE)) == [
        "tilecraft.transform.a", "tilecraft.ir.b", "tilecraft.runtime.kernel"]
    src = PACKAGE / "transform" / "pipeline.py"
    assert "tilecraft.options" in _imports(src, set(_graph()))
