"""torchmark's packages import in one direction: no cycles between its top-level
packages and modules, and core/ imports nothing else of torchmark (docs/design.md)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "torchmark"


def _unit(module: str) -> str:
    """The top-level package or module of `torchmark.x.y` ("x"); "torchmark" itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "torchmark"


def import_graph() -> dict[str, dict[str, list[str]]]:
    """unit -> {imported unit: [modules that import it]}, from every import statement
    (function-level ones included: a lazy import is still a dependency)."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in SRC.rglob("*.py"):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        source = _unit(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "torchmark" or name.startswith("torchmark."):
                    target = _unit(name)
                    if target != source:
                        graph[source][target].append(module)
    return graph


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        on_stack.add(unit)
        for target in graph.get(unit, {}):
            if target not in index:
                visit(target)
                low[unit] = min(low[unit], low[target])
            elif target in on_stack:
                low[unit] = min(low[unit], index[target])
        if low[unit] == index[unit]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == unit:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for unit in sorted({*graph, *(t for targets in graph.values() for t in targets)}):
        if unit not in index:
            visit(unit)
    return found


def test_no_import_cycles_between_torchmark_packages():
    graph = import_graph()
    found = cycles(graph)
    detail = [f"{a} -> {b} ({', '.join(sorted(set(graph[a][b]))[:3])})"
              for component in found for a in component for b in component
              if b in graph.get(a, {})]
    assert not found, "import cycles: " + "; ".join(detail)


def test_core_imports_nothing_above_it():
    graph = import_graph()
    assert dict(graph.get("core", {})) == {}, dict(graph["core"])


def test_torch_thread_count_is_set_in_one_place():
    """core/threads.py changes torch's intra-op thread count; nothing else calls
    set_num_threads (the C++ snippets set theirs in generated code)."""
    import torchmark

    src = Path(torchmark.__file__).parent
    found: dict[str, int] = defaultdict(int)
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "set_num_threads":
                found[str(path.relative_to(src))] += 1
    assert dict(found) == {"core/threads.py": 1}, dict(found)
