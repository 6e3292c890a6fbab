"""The package's shape, as docs/architecture.md states it: checked, so that it stays true.

- no import cycle between the package's modules, counting imports inside functions too
  (a cycle hidden in a function is still a cycle: neither module can be read alone);
- no module over MAX_LINES lines;
- siblings imported relatively, so the folder (tracer/) and the package (mysqlio) read alike.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "tracer"
PACKAGE = "mysqlio"
MAX_LINES = 600


def module_name(path: Path) -> str:
    """mysqlio.x.y for tracer/x/y.py; a package's __init__ is the package itself."""
    parts = list(path.relative_to(PACKAGE_DIR).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def _resolve(current: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = current.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The package's modules that `name` imports, wherever in the file the import is."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_package, node)
            # `from . import x`: x may be a module; `from .x import y`: the module is x
            targets = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known] or [base]
        else:
            continue
        for target in targets:
            while target and target not in known:  # mysqlio.a.b.c -> the longest known module
                target = target.rpartition(".")[0]
            if target and target != name and target != PACKAGE:
                yield target


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: set(imported(name, path, known)) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_sees_a_cycle_and_a_function_level_import(tmp_path: Path) -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from .other import x\n    from . import third\n")
    found = set(imported("mysqlio.m", mod, {"mysqlio.m", "mysqlio.other", "mysqlio.third"}))
    assert found == {"mysqlio.other", "mysqlio.third"}
    absolute = [
        _absolute_package_import(n)
        for n in ast.parse("from mysqlio.x import y\nimport mysqlio.z\nfrom .x import y").body
    ]
    assert absolute == [True, True, False]


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_no_module_over_the_line_limit() -> None:
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def _absolute_package_import(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] == PACKAGE
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] == PACKAGE for a in node.names)


def test_siblings_are_imported_relatively() -> None:
    absolute = [
        f"{name}:{node.lineno}"
        for name, path in modules().items()
        for node in ast.walk(ast.parse(path.read_text()))
        if _absolute_package_import(node)
    ]
    assert absolute == []


def test_commands_import_without_a_mysql_driver() -> None:
    """Only what talks to the server needs PyMySQL: the command line, the views, reports
    and the exporter import without it (the SystemTap guests of the kernel matrix build
    and run the module with a Python that has no PyMySQL; so may a DBA's host)."""
    import subprocess
    import sys

    modules = ["cli", "view", "top", "record", "report.build", "plot", "export", "exporter", "exporter_fleet"]
    code = "import sys; sys.modules['pymysql'] = None\n" + "".join(f"import mysqlio.{m}\n" for m in modules)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
