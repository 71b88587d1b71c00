"""The package's layers import downwards only, as docs/development.md states them.

Each module of workflow/tierbench/ is placed in one layer; a module may import
from its own layer and the ones below, never from one above. Imports under
``if TYPE_CHECKING:`` are annotations only, never run, and do not count.
"""

from __future__ import annotations

import ast
import importlib
from fnmatch import fnmatch
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "workflow" / "tierbench"

#: the layers, lowest first (module names relative to the package, fnmatch patterns)
LAYERS = (
    (
        "shared helpers",
        {
            "__init__", "errors", "units", "records", "files", "locks", "packages", "tiers",
            "schemas", "job", "rundir", "probe", "mounts", "sharedfs", "cluster", "allocations",
            "compute", "native", "syscalls", "pagecache",
        },
    ),
    # the cluster on one machine: infrastructure beside the pipeline, built on the helpers
    ("the cluster on one machine", {"minicluster", "minicluster.*"}),
    # each application beside its proxy and their helpers: workloads.cfd.*, workloads.fe.*
    ("workloads", {"workloads", "workloads.*"}),
    (
        "planning and running",
        {"matrix", "runner", "preflight", "needs", "paperrun"},
    ),
    (
        "aggregation",
        {
            "aggregate", "intervals", "reference", "fidelity", "fidelity.*", "verdicts", "staging",
            "lesson_data", "adaptive", "answer", "profile", "predict",
            "resultsdb", "resultsdb_cli", "resultsdb_export",
        },
    ),
    ("report", {"report", "compare", "plotting", "figures", "figures.*", "workload_docs"}),
)  # fmt: skip


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int | None:
    for index, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch(module, pattern) for pattern in patterns):
            return index
    return None


def _run_time_nodes(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        yield node
        yield from _run_time_nodes(node)


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``module`` imports, relative to the package."""
    is_package = path.name == "__init__.py"
    here = [] if module == "__init__" else module.split(".")
    found = set()
    for node in _run_time_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[0] == "tierbench"]
            found |= {".".join(n.split(".")[1:]) or "__init__" for n in names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here if is_package else here[:-1]
                base = base[: len(base) - (node.level - 1)]
            elif (node.module or "").split(".")[0] == "tierbench":
                base = []
            else:
                continue
            target = base + [p for p in (node.module or "").split(".") if p]
            if node.level == 0:
                target = target[1:]
            target_name = ".".join(target) or "__init__"
            for alias in node.names:
                submodule = ".".join([*target, alias.name])
                found.add(submodule if submodule in known else target_name)
    return found - {module}


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in modules() if layer_of(m) is None)
    assert not unplaced, f"place these modules in a layer of LAYERS: {unplaced}"


def test_no_import_runs_back_up_the_layers():
    known = set(modules())
    upward = []
    for module, path in modules().items():
        for target in sorted(imports(module, path, known)):
            if layer_of(target) is not None and layer_of(target) > layer_of(module):
                upward.append(
                    f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                    f"({LAYERS[layer_of(target)][0]})"
                )
    assert not upward, "\n".join(upward)


def test_the_check_sees_an_import_that_runs_back_up(tmp_path):
    """The parser finds relative, absolute and function-level imports, and skips annotations."""
    source = tmp_path / "job.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from .workloads import get\n"
        "import tierbench.matrix\n"
        "from . import verdicts, units\n"
        "def f():\n    from .report import main\n"
        "if TYPE_CHECKING:\n    from .runner import run_job\n"
    )
    found = imports("job", source, set(modules()))
    assert found == {"workloads", "matrix", "verdicts", "units", "report"}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of a graph (module -> modules it imports): its strongly
    connected components of more than one module, or of one that imports itself."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in graph.get(module, ()):
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def import_graph() -> dict[str, set[str]]:
    known = set(modules())
    graph = {module: imports(module, path, known) & known for module, path in modules().items()}
    # a package's __init__ that only gathers its modules is no edge of a circle
    return {module: targets - {"__init__"} for module, targets in graph.items()}


def test_no_two_modules_import_each_other_even_inside_functions():
    found = circles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_an_application_never_reaches_its_proxy():
    """The proxy may import its application (to time it), never the other way round, not
    even through a helper: what the two share lives in a module of its own (cfd_launch)."""
    from tierbench.workloads import modules as workload_modules
    from tierbench.workloads import registry

    graph = import_graph()
    where = {name: f"workloads.{path}" for name, path in workload_modules().items()}
    found = []
    for pair in (w.stands_for for w in registry().values() if w.stands_for is not None):
        proxy = {m for n, m in where.items() if n.startswith(pair.proxy)}
        application = sorted(m for n, m in where.items() if n.startswith(pair.real))
        for start in application:
            seen, todo = set(), [start]
            while todo:
                for target in graph.get(todo.pop(), ()):
                    if target not in seen:
                        seen.add(target)
                        todo.append(target)
            found += [f"{start} reaches {m}" for m in sorted(seen & proxy)]
    assert not found, "\n".join(found)


def test_the_circle_check_finds_a_circle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(graph) == [["a", "b", "c"], ["e"]]


def test_every_module_imports():
    """A name moved to another module and still imported from the old one fails here, not in
    the one end-to-end run that reaches it."""
    failed = []
    for module in modules():
        if module.endswith("__main__"):  # runs its command line when imported
            continue
        name = "tierbench" if module == "__init__" else f"tierbench.{module}"
        try:
            importlib.import_module(name)
        except ImportError as error:
            failed.append(f"{name}: {error}")
    assert not failed, "\n".join(failed)
