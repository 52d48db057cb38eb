"""The package's import graph: no cycle among its modules, and no import that runs back up the layering of
``shared/notes/architecture.md``. Every import statement counts, including those inside functions (a lazy import
is still a dependency) and under ``TYPE_CHECKING``. Also the house's sizes: few loose modules at the top, no
file or function too long to read whole."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "vlbias"

#: package (the first name below vlbias) -> the packages it may import; a package absent here may import any.
ALLOWED = {
    "errors": set(),
    "renamed": set(),
    "options": {"errors"},
    "lazy_table": {"errors"},
    "atomic": {"errors"},
    "metrics": {"errors", "options", "runtime"},
    "objectives": {"errors"},
    "data": {"errors", "options", "atomic", "lazy_table", "resources"},
    # the adapters and their shared machinery: never what uses them (mitigation, suites, modules, the commands...);
    # a mitigation that is a model kind (`debiased`) is named in the catalog by its "module:Class" string
    "models": {"errors", "options", "atomic", "lazy_table", "runtime", "data"},
    "results": {"errors", "atomic", "vlbias"},
    "report": {"errors", "atomic", "results", "vlbias"},
    "runtime": {"errors"},
}
#: package -> the packages it must never import (the layers above it), where a whole list of allowed ones would
#: only repeat the code: the commands call launch and the workflows, never the other way round.
FORBIDDEN = {
    "launch": {"cli", "commands", "workflows", "experiments"},
    "mitigation": {"cli", "commands", "workflows", "report", "launch", "experiments"},
    "workflows": {"cli", "commands", "launch", "experiments"},
}
MAX_LOOSE_MODULES = 8  # besides __init__.py, at the package's top level
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _graph() -> dict[str, set[str]]:
    """module -> the package modules it imports."""
    known = _modules()
    graph = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name in known}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(kept + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in known else base)
        graph[name] = {target for target in targets if target in known} - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "vlbias"


def test_no_module_imports_itself_back_through_others():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _imports_of(package: str) -> list[tuple[str, str]]:
    """``(module, target)`` of every import by a module of ``package``, sorted."""
    graph = _graph()
    return sorted(
        (module, target) for module, targets in graph.items() if _package(module) == package for target in targets
    )


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_lower_layers_import_only_what_is_below_them(package):
    allowed = ALLOWED[package] | {package}
    assert [f"{m} -> {t}" for m, t in _imports_of(package) if _package(t) not in allowed] == []


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_package_imports_a_layer_above_it(package):
    assert [f"{m} -> {t}" for m, t in _imports_of(package) if _package(t) in FORBIDDEN[package]] == []


def test_only_the_console_script_and_the_experiments_import_the_commands_and_nothing_imports_the_console_script():
    graph = _graph()
    assert [module for module, targets in graph.items() if "vlbias.cli" in targets] == []
    runners = sorted(
        module
        for module, targets in graph.items()
        if _package(module) not in ("commands", "experiments")
        and any(_package(target) == "commands" for target in targets)
    )
    assert runners == ["vlbias.cli"]


def test_the_top_level_holds_few_loose_modules():
    loose = sorted(path.stem for path in SRC.glob("*.py") if path.name != "__init__.py")
    assert len(loose) <= MAX_LOOSE_MODULES, loose


def test_no_file_or_function_is_too_long_to_read_whole():
    too_long = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        name = path.relative_to(SRC).as_posix()
        if len(text.splitlines()) > MAX_FILE_LINES:
            too_long.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            lines = node.end_lineno - node.lineno + 1 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else 0
            if lines > MAX_FUNCTION_LINES:
                too_long.append(f"{name}:{node.name}: {lines} lines")
    assert too_long == []
