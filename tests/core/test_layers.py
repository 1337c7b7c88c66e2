"""torchmark's packages import in one direction (docs/design.md): every import, lazy ones
inside functions included, `from torchmark import X` resolved to the package or module
that X names, and `importlib.import_module("torchmark....")` with a literal name too.
No cycle between packages or between modules, and each package imports only from the
layers below it."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "torchmark"

# bottom to top: a package may import from the layers before its own, never after, and
# from the packages of its own layer listed in SIDEWAYS only
LAYERS = [
    ["core"],
    ["verdicts"],
    ["callgrind", "cpp", "profiler_logs", "executors"],
    ["timing"],
    ["fuzzing", "ops", "suite"],
    ["op_fuzzers", "replay"],
    ["compare", "records"],
    ["store", "compilation"],
    ["regressions"],
    ["report"],
    ["rootcause"],
    ["utils", "demos", "pytest_plugin", "server", "cli", "__main__", "torchmark"],
]
SIDEWAYS = {("replay", "ops"), ("cli", "demos"), ("cli", "report"), ("__main__", "cli"),
            ("utils", "compare"), ("cli", "server")}
ENTRY_POINTS = {"cli", "pytest_plugin", "__main__", "torchmark"}  # nothing imports these


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        out[".".join(path.relative_to(SRC.parent).with_suffix("").parts)
            .removesuffix(".__init__")] = path
    return out


def _exports() -> dict[str, str]:
    """torchmark/__init__.py's lazy names: NAME -> the module that defines it."""
    tree = ast.parse((SRC / "__init__.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("torchmark/__init__.py defines no _EXPORTS")


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The torchmark names an import statement (or a literal import_module call) in
    `module` brings in, as dotted names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module if is_package else module.rpartition(".")[0]
            parts = package.split(".")[:len(package.split(".")) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        return [f"{base}.{alias.name}" for alias in node.names]
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)) and \
            getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module" \
            and node.args and isinstance(node.args[0], ast.Constant) and \
            isinstance(node.args[0].value, str):
        return [node.args[0].value]
    return []


def module_graph() -> dict[str, set[str]]:
    """module -> the torchmark modules it imports (every import; see the docstring)."""
    modules, exports = _modules(), _exports()

    def resolve(name: str) -> str | None:
        if not name.startswith("torchmark"):
            return None
        head, _, last = name.rpartition(".")
        if head == "torchmark" and last in exports:  # from torchmark import Timer
            return exports[last]
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for name in _imported(node, module, path.name == "__init__.py"):
                target = resolve(name)
                if target and target != module and not (
                        module == "torchmark" and target != "torchmark"):
                    graph[module].add(target)
    return graph


def unit(module: str) -> str:
    """The top-level package or module of `torchmark.x.y` ("x"); "torchmark" itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "torchmark"


def unit_graph() -> dict[str, dict[str, set[str]]]:
    """unit -> {imported unit: modules that import it}."""
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for module, targets in module_graph().items():
        for target in targets:
            if unit(target) != unit(module) and target != "torchmark":  # __version__
                out[unit(module)][unit(target)].add(module)
    return out


def cycles(graph: dict[str, set[str]] | dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
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

    for node in sorted({*graph, *(t for targets in graph.values() for t in targets)}):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_lazy_and_package_imports():
    graph = module_graph()
    # inside a function: `from torchmark import op_fuzzers as of` once hid a cycle
    assert "torchmark.op_fuzzers.binary" in graph["torchmark.op_fuzzers.catalog"]
    assert "torchmark.timing.timer_class" in graph["torchmark.compare.interleave"]


def test_no_import_cycles_between_packages():
    graph = unit_graph()
    found = cycles(graph)
    detail = [f"{a} -> {b} ({', '.join(sorted(graph[a][b])[:3])})"
              for component in found for a in component for b in component
              if b in graph.get(a, {})]
    assert not found, "import cycles: " + "; ".join(detail)


def test_no_import_cycles_between_modules():
    assert not cycles(module_graph())


def test_every_package_imports_only_from_the_layers_below_it():
    layer = {name: i for i, names in enumerate(LAYERS) for name in names}
    units = {unit(m) for m in _modules()}
    assert units <= set(layer), f"packages missing from LAYERS: {units - set(layer)}"
    upward = [f"{a} -> {b} ({', '.join(sorted(modules)[:2])})"
              for a, targets in unit_graph().items() for b, modules in targets.items()
              if (a, b) not in SIDEWAYS and (layer[b] >= layer[a] or b in ENTRY_POINTS)]
    assert not upward, "imports that go up or sideways: " + "; ".join(upward)


def test_core_imports_nothing_above_it():
    assert dict(unit_graph().get("core", {})) == {}


def test_torch_thread_count_is_set_in_one_place():
    """core/threads.py changes torch's intra-op thread count; nothing else calls
    set_num_threads (the C++ snippets set theirs in generated code)."""
    found: dict[str, int] = defaultdict(int)
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "set_num_threads":
                found[str(path.relative_to(SRC))] += 1
    assert dict(found) == {"core/threads.py": 1}, dict(found)
