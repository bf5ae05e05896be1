"""The import rules of the layout (README, "Layout"), read from the folders: a module's layer is where it lives.

- Every Python module outside tests/ lives in a known place: an app's folder (or its top, where every module is
  the app's core except Django's and Channels' edge roles), the project's wiring, the benchmarks. A module in a
  folder no rule names is in no layer, and fails here.
- runs/runtime/ is pure: it imports no Django and nothing of the apps (a fresh-interpreter check is in
  tests/runs/runtime/test_purity.py).
- The core of runs imports nothing from approvals, from runs' edges or from the demo: approvals and the edges
  build on runs, never the reverse. The core of approvals builds on the core of runs only. The core of
  notifications (its top-level modules and its delivery) builds on the cores of runs and approvals; what each
  change publishes renders the runs API's JSON, so it is an edge (notifications/publishing).
- Edges (the wire, execution, presenters, API, pages, admin) may compose every product layer; only they, the
  wiring and the commands may reach the demo app, which is a plugin of the serving command. The management
  commands are entry points, like manage.py: they may start anything, the benchmarks included.
- The core of accounts (API tokens and their authentication) imports no other app; edges build on it.
- No two folders or top-level modules of one app import each other, even through others: the folders of an app
  follow its layers, one floor above the other.
Every import statement counts, wherever it stands in a module, so a function-local import cannot hide.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

PURE, RUNS_CORE, APPROVALS_CORE, EDGE, DEMO, WIRING, TOOLS, COMMANDS, MIGRATIONS = (
    "pure runtime", "core of runs", "core of approvals", "edge", "demo", "wiring", "tools", "commands", "migrations")
ACCOUNTS_CORE = "core of accounts"
NOTIFICATIONS_CORE = "core of notifications"

#: The layer of each folder of an app, by the folder's name. A module at an app's top is the app's core, unless
#: its name is an edge role.
FOLDERS = {
    "runs": {
        "runtime": PURE, "secrets": RUNS_CORE, "ownership": RUNS_CORE, "stores": RUNS_CORE, "agents": RUNS_CORE,
        "services": RUNS_CORE, "wire": EDGE, "execution": EDGE, "presenters": EDGE, "api": EDGE, "pages": EDGE,
        "management": COMMANDS, "migrations": MIGRATIONS,
    },
    "approvals": {"console": EDGE, "migrations": MIGRATIONS},
    "notifications": {"delivery": NOTIFICATIONS_CORE, "publishing": EDGE, "api": EDGE, "management": COMMANDS,
                      "migrations": MIGRATIONS},
    "demo": {"migrations": MIGRATIONS},
    "accounts": {"api": EDGE, "pages": EDGE, "management": COMMANDS, "migrations": MIGRATIONS},
    "observability": {"migrations": MIGRATIONS},
}
#: Each app's own core (its top-level modules' layer); the demo is one layer whatever the module.
APP_CORE = {"runs": RUNS_CORE, "approvals": APPROVALS_CORE, "notifications": NOTIFICATIONS_CORE, "demo": DEMO,
            "accounts": ACCOUNTS_CORE, "observability": EDGE}
#: Django's and Channels' roles that compose the layers: the admin, app configs, system checks, URL and socket
#: routes.
EDGE_ROLES = {"admin", "apps", "checks", "routing", "urls"}
#: Places that are not apps: the project's wiring (settings, URLs, ASGI) and the benchmarks.
PLACES = {"deuz_project": WIRING, "bench": TOOLS, "manage.py": WIRING}

#: What each layer may import, of the apps' layers.
#: The core of accounts (tokens, their authentication) builds on Django alone; the edges of every app use it.
_CORES = {PURE, RUNS_CORE, APPROVALS_CORE, NOTIFICATIONS_CORE, ACCOUNTS_CORE}
MAY_IMPORT = {
    PURE: {PURE},
    RUNS_CORE: {PURE, RUNS_CORE},
    APPROVALS_CORE: {PURE, RUNS_CORE, APPROVALS_CORE},
    ACCOUNTS_CORE: {ACCOUNTS_CORE},
    NOTIFICATIONS_CORE: {PURE, RUNS_CORE, APPROVALS_CORE, NOTIFICATIONS_CORE},
    EDGE: {*_CORES, EDGE, DEMO},
    DEMO: {*_CORES, EDGE, DEMO},
    WIRING: {*_CORES, EDGE, DEMO, WIRING},
    TOOLS: {*_CORES, EDGE, DEMO, WIRING, TOOLS},
    COMMANDS: {*_CORES, EDGE, DEMO, WIRING, TOOLS, COMMANDS},
}


def python_modules(root: Path = REPO) -> list[Path]:
    """Every Python module of the project outside tests/ (and the virtual environment, node packages)."""
    skip = {".venv", "node_modules", "tests", ".git", "staticfiles"}
    return sorted(path for path in root.rglob("*.py") if not skip & set(path.relative_to(root).parts))


def layer_of(relative: Path) -> str | None:
    """The layer ``relative`` (a path from the repository root) lives in, or None for a place no rule names."""
    parts = relative.parts
    if parts[0] in PLACES:
        return PLACES[parts[0]]
    if parts[0] not in APP_CORE:
        return None
    if len(parts) == 2:
        return EDGE if relative.stem in EDGE_ROLES else APP_CORE[parts[0]]
    return FOLDERS[parts[0]].get(parts[1]) or (DEMO if parts[0] == "demo" else None)


def unit_of(module: str) -> tuple[str, str] | None:
    """(app, folder or top-level module) of a dotted module name inside an app, e.g. ('runs', 'stores')."""
    parts = module.split(".")
    if parts[0] not in APP_CORE or len(parts) < 2:
        return None
    return parts[0], parts[1]


def module_layer(module: str) -> str | None:
    """The layer of an imported dotted module name (a package resolves like the modules inside it)."""
    parts = module.split(".")
    if parts[0] in PLACES:
        return PLACES[parts[0]]
    if parts[0] not in APP_CORE:
        return None  # not the project's: Django, the standard library...
    if len(parts) == 1:
        return APP_CORE[parts[0]]
    candidate = REPO.joinpath(*parts[:2])
    if candidate.is_dir():
        return FOLDERS[parts[0]].get(parts[1]) or (DEMO if parts[0] == "demo" else None)
    return EDGE if parts[1] in EDGE_ROLES else APP_CORE[parts[0]]


def imported_modules(path: Path, *, package: str | None = None, root: Path = REPO) -> set[str]:
    """Every module an import statement of ``path`` names (absolute; relative imports resolved to the package)."""
    package = package if package is not None else ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                names.add(f"{base}.{node.module}" if node.module else base)
            else:
                names.add(node.module or "")
    return names


def _names_any(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(name for name in modules if any(name == p or name.startswith(f"{p}.") for p in prefixes))


def import_cycle(edges: dict[str, set[str]]) -> list[str]:
    """One cycle of the directed graph ``edges`` (node -> nodes it imports), as the nodes around it, or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return []


def unit_graph(paths: list[Path], *, root: Path = REPO) -> dict[str, set[str]]:
    """Which folders and top-level modules of each app import which others of the same app."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in paths:
        relative = path.relative_to(root)
        if relative.parts[0] not in APP_CORE or "migrations" in relative.parts or len(relative.parts) < 2:
            continue
        source = (relative.parts[0], relative.parts[1].removesuffix(".py"))
        for module in imported_modules(path, root=root):
            target = unit_of(module)
            if target is not None and target[0] == source[0] and target != source:
                edges["/".join(source)].add("/".join(target))
    return edges


MODULES = [str(path.relative_to(REPO)) for path in python_modules()]


@pytest.mark.parametrize("path", MODULES)
def test_every_module_lives_in_a_layer(path):
    assert layer_of(Path(path)) is not None, f"{path} is in no layer: name its folder in tests/test_layers.py"


@pytest.mark.parametrize("path", [p for p in MODULES if layer_of(Path(p)) not in (MIGRATIONS, None)])
def test_each_module_imports_only_the_layers_below_it(path):
    layer = layer_of(Path(path))
    wrong = sorted(
        f"{module} ({module_layer(module)})" for module in imported_modules(REPO / path)
        if module_layer(module) is not None and module_layer(module) not in MAY_IMPORT[layer]
    )
    assert wrong == [], f"{path} ({layer}) imports what lies above it"


@pytest.mark.parametrize("path", [p for p in MODULES if layer_of(Path(p)) == PURE])
def test_the_runtime_imports_no_django(path):
    assert _names_any(imported_modules(REPO / path), ("django", "rest_framework", "channels")) == []


def test_no_two_folders_of_an_app_import_each_other():
    assert import_cycle(unit_graph(python_modules())) == []


# The rules themselves, on trees made for them.


def test_a_module_in_an_unnamed_folder_is_in_no_layer():
    assert layer_of(Path("runs/everything/helpers.py")) is None
    assert layer_of(Path("toolbox/helpers.py")) is None


def test_an_apps_top_level_module_is_its_core_unless_an_edge_role():
    assert layer_of(Path("runs/selectors.py")) == RUNS_CORE
    assert layer_of(Path("approvals/signing.py")) == APPROVALS_CORE
    assert layer_of(Path("runs/admin.py")) == EDGE


def test_the_rule_finds_a_function_local_import(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text("def f():\n    from approvals.models import ApprovalRequest\n", encoding="utf-8")
    assert _names_any(imported_modules(module, package="runs"), ("approvals",)) == ["approvals.models"]


def test_relative_imports_resolve_to_their_package(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text("from .errors import RunError\nfrom ..models import Run\n", encoding="utf-8")
    assert imported_modules(module, package="runs.runtime") == {"runs.runtime.errors", "runs.models"}


def test_the_cycle_finder_sees_two_folders_that_import_each_other():
    assert import_cycle({"runs/a": {"runs/b"}, "runs/b": {"runs/c"}, "runs/c": {"runs/a"}}) == [
        "runs/a", "runs/b", "runs/c", "runs/a"]
    assert import_cycle({"runs/a": {"runs/b"}, "runs/b": set()}) == []


def test_the_unit_graph_joins_modules_of_one_folder(tmp_path):
    (tmp_path / "runs" / "wire").mkdir(parents=True)
    (tmp_path / "runs" / "execution").mkdir()
    (tmp_path / "runs" / "wire" / "followers.py").write_text("from runs.execution.legs import leg_execute\n")
    (tmp_path / "runs" / "execution" / "legs.py").write_text("from runs.wire.writer import JournalWriter\n")
    graph = unit_graph(python_modules(tmp_path), root=tmp_path)
    assert import_cycle(graph) == ["runs/execution", "runs/wire", "runs/execution"]
