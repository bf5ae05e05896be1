"""The import rules of the layout (README, "Layout"): imports point inward.

- runs/runtime/ is pure: it imports no Django and nothing of the apps (a fresh-interpreter check is in
  tests/runtime/test_purity.py).
- The core of runs (models, services, selectors, stores, effects, journal and their helpers) imports nothing
  from approvals, function-local imports included: approvals builds on runs, never the reverse.
- The core of approvals builds on the core of runs only, never on runs' edges.
- Edges (API, pages, consumers, the leg runner, admin, commands, presenters) may compose both.
Every import statement counts, wherever it stands in a module, so a function-local import cannot hide.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

RUNS_CORE = [
    "runs/access.py", "runs/effects.py", "runs/errors.py", "runs/fencing.py", "runs/journal.py", "runs/models.py",
    "runs/notify.py", "runs/sealing.py", "runs/secrets.py", "runs/selectors.py", "runs/services.py", "runs/signals.py",
    "runs/stores/__init__.py", "runs/stores/db.py", "runs/stores/journal.py", "runs/stores/memory.py",
]
APPROVALS_CORE = [
    "approvals/access.py", "approvals/errors.py", "approvals/models.py", "approvals/selectors.py",
    "approvals/services.py", "approvals/signing.py",
]
#: Modules of runs that compose the layers (or run them), which the core of approvals must not import.
RUNS_EDGES = (
    "runs.admin", "runs.api", "runs.api.sockets", "runs.wire.followers", "runs.execution.legs", "runs.management",
    "runs.presenters", "runs.routing", "runs.api.events", "runs.pages.urls", "runs.pages.views", "runs.execution.worker",
)


def imported_modules(path: Path, *, package: str | None = None) -> set[str]:
    """Every module an import statement of ``path`` names (absolute; relative imports resolved to the package)."""
    package = package if package is not None else ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
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


def test_the_listed_core_modules_exist():
    assert [path for path in RUNS_CORE + APPROVALS_CORE if not (REPO / path).exists()] == []


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REPO)) for p in (REPO / "runs/runtime").rglob("*.py")))
def test_the_runtime_imports_no_django_and_no_app(path):
    modules = imported_modules(REPO / path)
    outside = [name for name in modules if name.startswith("runs.") and not name.startswith("runs.runtime")]
    assert _names_any(modules, ("django", "rest_framework", "channels", "approvals", "deuz_project")) + outside == []


@pytest.mark.parametrize("path", RUNS_CORE)
def test_the_core_of_runs_imports_nothing_from_approvals(path):
    assert _names_any(imported_modules(REPO / path), ("approvals",)) == []


@pytest.mark.parametrize("path", APPROVALS_CORE)
def test_the_core_of_approvals_builds_on_the_core_of_runs_only(path):
    assert _names_any(imported_modules(REPO / path), RUNS_EDGES) == []


def test_the_rule_finds_a_function_local_import(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text("def f():\n    from approvals.models import ApprovalRequest\n", encoding="utf-8")
    assert _names_any(imported_modules(module, package="runs"), ("approvals",)) == ["approvals.models"]


def test_relative_imports_resolve_to_their_package(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text("from .errors import RunError\nfrom ..models import Run\n", encoding="utf-8")
    assert imported_modules(module, package="runs.runtime") == {"runs.runtime.exceptions", "runs.models"}
