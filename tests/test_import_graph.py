"""The package's import graph: no cycle among its modules, and no import that runs back up the layering of
``shared/notes/architecture.md``. Every import statement counts, including those inside functions (a lazy import
is still a dependency) and under ``TYPE_CHECKING``."""

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
    "torch_pair": {"errors"},
    "metrics": {"errors", "options", "torch_pair"},
    "objectives": {"errors"},
    "data": {"errors", "options", "atomic", "lazy_table", "resources"},
    "results": {"errors", "atomic", "vlbias"},
    "report": {"errors", "atomic", "results", "vlbias"},
}


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


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_lower_layers_import_only_what_is_below_them(package):
    graph = _graph()
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _package(module) == package
        for target in targets
        if _package(target) not in ALLOWED[package] | {package}
    )
    assert upward == []


def test_commands_are_run_by_the_console_script_and_slurm_jobs_only_and_nothing_imports_the_console_script():
    graph = _graph()
    assert [module for module, targets in graph.items() if "vlbias.cli" in targets] == []
    runners = sorted(module for module, targets in graph.items() if "vlbias.commands" in targets)
    assert runners == ["vlbias.cli", "vlbias.launch.job"]
