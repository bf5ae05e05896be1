"""The README's "Your own agent" walk-through, followed as written: its shell commands make the package in an
empty folder beside a checkout, its Python block is the agent's module, its `agents check` command passes with
its variables, and the agent then runs end to end (a reviewer approves the refund; a second run for the same
ticket is given the first one's record, and the refund system's books keep one refund)."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys

import pytest

from approvals.models import ApprovalRequest
from runs.models import Run
from runs.selectors import run_latest_messages
from tests.environment import REPO_ROOT, clean_env
from tests.factories import verdict

SECTION = re.search(r"^## Your own agent\n(.*?)^## ", (REPO_ROOT / "README.md").read_text(), re.M | re.S).group(1)
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```", SECTION, re.M | re.S)


def block(language: str, index: int = 0) -> str:
    return [code for kind, code in BLOCKS if kind == language][index]


def forget(package: str) -> None:
    for name in [name for name in sys.modules if name == package or name.startswith(f"{package}.")]:
        del sys.modules[name]


@pytest.fixture
def walkthrough(tmp_path, monkeypatch):
    """The README's steps up to serving: the package made by its commands, its module written where its first
    line says, and the variables its export line sets (from a checkout folder beside the package)."""
    subprocess.run(["bash", "-ec", block("sh", 0)], cwd=tmp_path, check=True)
    module = block("python")
    path = module.splitlines()[0].removeprefix("# ").strip()
    (tmp_path / path).write_text(module)
    checkout = tmp_path / "deuz"
    checkout.mkdir()
    export = block("sh", 1).splitlines()[0]
    shown = subprocess.run(["bash", "-ec", f"{export}\necho \"$PYTHONPATH\"\necho \"$DEUZ_AGENTS\""], cwd=checkout,
                           check=True, capture_output=True, text=True).stdout.splitlines()
    variables = {"PYTHONPATH": shown[0], "DEUZ_AGENTS": shown[1]}
    monkeypatch.setenv("ACME_REFUNDS", str(tmp_path / "refunds.sqlite3"))
    monkeypatch.syspath_prepend(variables["PYTHONPATH"])
    forget("acme_agents")
    yield variables, tmp_path
    forget("acme_agents")


def test_the_readmes_agents_check_passes_with_its_variables(walkthrough):
    variables, _ = walkthrough
    check = block("sh", 1).splitlines()[1].split("#")[0].strip()
    assert check.startswith(".venv/bin/python manage.py agents check")
    command = [sys.executable, *check.split()[1:]]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                            env=clean_env(**variables))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "helpdesk: ok" in result.stdout


@pytest.mark.django_db(transaction=True)
def test_the_readmes_agent_refunds_once_after_a_reviewer_approves(walkthrough, api_client, settings, drain_runs):
    variables, folder = walkthrough
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, **json.loads(variables["DEUZ_AGENTS"])}
    for run_id in ("refund-1", "refund-2"):
        started = api_client.post("/api/runs/", {"agent": "helpdesk", "run_id": run_id,
                                                 "messages": [{"role": "user", "content": "Refund T-1"}]},
                                  format="json")
        assert started.status_code == 201, started.json()
        drain_runs()
        verdict(ApprovalRequest.objects.get(run__run_id=run_id, status=ApprovalRequest.Status.PENDING))
        drain_runs()
        assert Run.objects.get(run_id=run_id).status == Run.Status.COMPLETED
    books = sqlite3.connect(folder / "refunds.sqlite3").execute("SELECT operation_id, amount FROM refund").fetchall()
    assert books == [("refund:T-1-v1", "12.00")]
    second = api_client.get("/api/runs/refund-2/").json()
    assert second["effects"] == []  # the operation is the first run's; the second was given its record
    [result] = [part for message in run_latest_messages(run=Run.objects.get(run_id="refund-2"))
                if message["role"] == "tool" for part in message["content"] if part["tool_name"] == "refund"]
    assert result["output"]["replayed_from"]["run_id"] == "refund-1"
