"""The layers of records/ as its folder listing promises them, read from the import graph of the
source itself (every import, also those inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "records"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module(p): p for p in PACKAGE.rglob("*.py") if "migrations" not in p.relative_to(PACKAGE).parts
}


def _imports(name: str, *, lazy: bool = True) -> set[str]:
    """What a module imports: records modules by their own name, anything else by its top;
    with `lazy=False`, only what it imports when it is loaded (not inside functions)."""
    found: set[str] = set()
    tree = ast.parse(MODULES[name].read_text())
    for node in ast.walk(tree) if lazy else tree.body:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" for a in node.names]
            targets = [t if t in MODULES else node.module for t in targets]
        for target in targets:
            found.add(target if target.startswith("records") else target.split(".")[0])
    return found


GRAPH = {name: _imports(name) for name in MODULES}
ON_LOAD = {name: _imports(name, lazy=False) for name in MODULES}


def _reach(start: str, graph: dict[str, set[str]] = GRAPH) -> set[str]:
    """Every module `start` may load: what it imports, and the packages of those, transitively."""
    # Python imports a module's packages before the module itself.
    todo = [start, *(".".join(start.split(".")[:i]) for i in range(1, start.count(".") + 1))]
    seen: set[str] = set(todo)
    while todo:
        name = todo.pop()
        for target in graph.get(name, ()):
            parents = [".".join(target.split(".")[:i]) for i in range(1, target.count(".") + 1)]
            for t in [target, *parents]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
    return seen


def _in(prefix: str) -> list[str]:
    return sorted(m for m in MODULES if m == prefix or m.startswith(prefix + "."))


READERS = [
    *_in("records.formats"),
    *_in("records.scorer"),
    "records.replays.formats",
    "records.replays.secretscreen",
    "records.replays.gojson",
    "records.conformance.formats",
    "records.stats",
    "records.evidence",
]


@pytest.mark.parametrize("module", READERS)
def test_readers_and_the_scorer_import_no_django_no_bulk_and_no_processes(module):
    loaded = _reach(module)
    assert "django" not in loaded, module
    assert not [m for m in loaded if m.startswith("records.bulk")], module
    assert "multiprocessing" not in loaded, module


@pytest.mark.parametrize("module", _in("records.bulk"))
def test_bulk_knows_no_domain(module):
    assert [
        m for m in GRAPH[module] if m.startswith("records.") and not m.startswith("records.bulk")
    ] == []


@pytest.mark.parametrize(
    "module",
    ["records.parser", "records.scoring.worker", "records.search.worker", "records.csv_writer"],
)
def test_worker_processes_load_no_django(module):
    # A threaded server's forkserver preloads these alone, before any app registry exists.
    assert "django" not in _reach(module, ON_LOAD), module


@pytest.mark.parametrize(
    "module", _in("records.views") + ["records.replays.views", "records.conformance.views"]
)
def test_views_never_import_bulk(module):
    assert [m for m in GRAPH[module] if m.startswith("records.bulk")] == [], module


@pytest.mark.parametrize("module", _in("records.queries"))
def test_queries_never_import_forms(module):
    assert not [m for m in GRAPH[module] if "forms" in m.split(".")[-1]], module


def test_there_is_no_import_cycle_in_records():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in (m for m in GRAPH[v] if m in GRAPH):
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
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert cycles == []


def _private_imports() -> list[str]:
    """Every import, anywhere in records/ and tests/, of an underscore name from another module
    of the project: such a name is a seam, and a seam is public."""
    found = []
    for path in sorted([*MODULES.values(), *(ROOT / "tests").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module.split(".")[0] not in ("records", "tests", "evaldash"):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    where = path.relative_to(ROOT)
                    found.append(f"{where}:{node.lineno} imports {alias.name} from {node.module}")
    return found


def test_no_module_imports_another_modules_underscore_name():
    offenders = _private_imports()
    assert offenders == [], "underscore names imported across modules:\n" + "\n".join(offenders)


@pytest.mark.parametrize("module", _in("records.models"))
def test_models_never_import_the_scorer(module):
    # The tables take the verdict's layout and the token columns from `records.formats.rows`.
    assert [m for m in GRAPH[module] if m.startswith("records.scorer")] == [], module


FAMILIES = ("records.replays", "records.conformance")
# The modules outside the families that must route to them, each with its reason.
ROUTES_TO_FAMILIES = {
    "records.urls": "the site's URLs include each family's pages",
    "records.ingest.documents": "the one ingest entry point hands a family's document to its store",
    "records.management.commands.ingest_conformance": (
        "the family's own command: Django finds commands only in the app's management package"
    ),
    "records.management.commands.demo": "the demo stores a conformance run as its command would",
}


@pytest.mark.parametrize(
    "module", [m for m in MODULES if not any(m == f or m.startswith(f + ".") for f in FAMILIES)]
)
def test_the_shared_core_never_imports_a_family(module):
    reached = [m for m in GRAPH[module] if any(m == f or m.startswith(f + ".") for f in FAMILIES)]
    if module in ROUTES_TO_FAMILIES:
        assert reached, f"{module} no longer routes to a family: drop it from the list"
    else:
        assert reached == [], module
