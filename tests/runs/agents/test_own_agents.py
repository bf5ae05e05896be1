"""Agents from the operator's own code: DEUZ_AGENTS in the environment adds them (or replaces a built-in), a bad
entry stops start-up naming it, `GET /api/agents/` and `manage.py agents` list what runs can name, and `agents
check` builds each one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.services import token_create, token_revoke
from approvals.roles import REVIEWERS_GROUP, SUPPORT_GROUP
from tests.environment import PRODUCTION_ENV, REPO_ROOT, clean_env
from tests.factories import make_user
from tests.processes import Served, wait_until
from tests.streams import follow, texts

SHOW_AGENTS = "import json, django; django.setup(); from django.conf import settings; print(json.dumps(settings.DEUZ_AGENTS))"

OUTSIDE_AGENT = '''
from runs.agents import AgentDefinition
from runs.runtime import tool
from runs.runtime.testing import ScriptedModel


def echo_agent(*, leg=None):
    """Says hello, once: an agent from a package outside the project."""
    return AgentDefinition(
        name="echo", description="Says hello.",
        model=ScriptedModel([{"content": [{"type": "text", "text": "Hello from outside."}]}]),
        tools={"shout": tool(description="Shout a word.", input_schema={"type": "object", "properties": {
            "word": {"type": "string"}}, "required": ["word"]}, execute=lambda tool_input, ctx: tool_input["word"])},
    )


def no_leg_agent():
    return None
'''


def _forget_acme_agents() -> None:
    for name in [name for name in sys.modules if name == "acme_agents" or name.startswith("acme_agents.")]:
        del sys.modules[name]


@pytest.fixture
def outside_package(tmp_path, monkeypatch):
    """A package ``acme_agents`` in a folder outside the repository, importable as an operator's would be (each
    test's own: the modules an earlier test imported are forgotten)."""
    package = tmp_path / "acme_agents"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "echo.py").write_text(textwrap.dedent(OUTSIDE_AGENT))
    _forget_acme_agents()
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    _forget_acme_agents()


def run_django(code: str, *, pythonpath: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                          env=clean_env(PYTHONPATH=pythonpath, **env))


def test_deuz_agents_in_the_environment_adds_an_agent_to_the_built_in_ones():
    result = run_django(SHOW_AGENTS, DEUZ_AGENTS=json.dumps({"helpdesk": "acme.helpdesk.helpdesk_agent"}))
    agents = json.loads(result.stdout)
    assert agents["helpdesk"] == "acme.helpdesk.helpdesk_agent" and "reimbursement" in agents


def test_an_entry_with_a_built_in_name_replaces_the_built_in():
    result = run_django(SHOW_AGENTS, DEUZ_AGENTS=json.dumps({"coder": "acme.coder.better_coder"}))
    assert json.loads(result.stdout)["coder"] == "acme.coder.better_coder"


@pytest.mark.parametrize("value, named", [
    ("not json", "it is not JSON"),
    ('["a"]', "must be a JSON object"),
    ('{"bad name!": "a.b"}', "'bad name!'"),
    ('{"ok": "not a path"}', "DEUZ_AGENTS['ok']"),
])
def test_a_malformed_deuz_agents_stops_start_up_naming_the_problem(value, named):
    result = run_django(SHOW_AGENTS, DEUZ_AGENTS=value)
    assert result.returncode != 0 and "DEUZ_AGENTS" in result.stderr and named in result.stderr


@pytest.mark.parametrize("command", ["worker", "serve"])
def test_an_entry_that_cannot_be_imported_stops_serve_and_worker_naming_it(command):
    result = subprocess.run([sys.executable, "manage.py", command], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=60, env=clean_env(DEUZ_AGENTS=json.dumps({"ghost": "nowhere.module.factory"})))
    assert result.returncode != 0
    assert "DEUZ_AGENTS['ghost'] = 'nowhere.module.factory' cannot be imported" in result.stderr


def test_an_entry_that_cannot_be_imported_stops_the_asgi_application_naming_it():
    result = run_django("import deuz_project.asgi", DEUZ_AGENTS=json.dumps({"ghost": "nowhere.module.factory"}))
    assert result.returncode != 0 and "DEUZ_AGENTS['ghost']" in result.stderr


def test_a_factory_that_takes_no_leg_is_refused_by_the_system_check(outside_package):
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=60, env=clean_env(PYTHONPATH=str(outside_package),
                                                      DEUZ_AGENTS=json.dumps({"odd": "acme_agents.echo.no_leg_agent"})))
    assert result.returncode != 0 and "does not take leg=" in result.stderr


@pytest.mark.django_db
def test_the_api_lists_every_agent_a_user_may_start_with_its_tools(api_client, outside_package, settings):
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "echo": "acme_agents.echo.echo_agent"}
    answer = api_client.get("/api/agents/")
    assert answer.status_code == 200
    agents = {agent["name"]: agent for agent in answer.json()["results"]}
    assert set(agents) == {"assistant", "coder", "echo", "files", "reimbursement"}
    assert agents["echo"]["tools"] == [{
        "name": "shout", "description": "Shout a word.", "needs_approval": "never", "effect": None,
        "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    }]
    pay = next(tool for tool in agents["reimbursement"]["tools"] if tool["name"] == "pay_expense")
    assert (pay["needs_approval"], pay["effect"]) == ("always", {"operation_key": True, "reconcile": True,
                                                                 "verify": True})
    assert agents["reimbursement"]["approvals_decided_by"] == "reviewers"


@pytest.mark.django_db
@pytest.mark.parametrize("groups", [(), (SUPPORT_GROUP,), (REVIEWERS_GROUP,)], ids=["plain", "support", "reviewer"])
def test_every_signed_in_role_may_list_the_agents_it_may_start(token_client, groups):
    answer = token_client(make_user("lister", *groups)).get("/api/agents/")
    assert answer.status_code == 200
    assert {agent["name"] for agent in answer.json()["results"]} == {"assistant", "coder", "files", "reimbursement"}


@pytest.mark.django_db
def test_the_agent_list_needs_a_signed_in_user(anonymous_client):
    assert anonymous_client.get("/api/agents/").status_code == 401


@pytest.mark.django_db
def test_a_revoked_token_or_an_inactive_user_may_not_list_the_agents(anonymous_client):
    revoked = make_user("revoked")
    issued = token_create(user=revoked, name="t")
    token_revoke(user=revoked, token_id=issued.token.pk)
    inactive = make_user("gone", is_active=False)
    for key in (issued.key, token_create(user=inactive, name="t").key):
        anonymous_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        assert anonymous_client.get("/api/agents/").status_code == 401


@pytest.mark.django_db
def test_an_agent_whose_factory_fails_is_listed_with_its_problem(api_client, settings):
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "ghost": "nowhere.module.factory"}
    agents = {agent["name"]: agent for agent in api_client.get("/api/agents/").json()["results"]}
    assert "No module named 'nowhere'" in agents["ghost"]["problem"] and agents["coder"]["problem"] is None


def test_manage_agents_lists_the_agents_and_who_decides_their_approvals(capsys):
    call_command("agents")
    out = capsys.readouterr().out
    assert "reimbursement" in out and "pay_expense (approval) (ledger)" in out and "reviewers" in out


def test_manage_agents_check_builds_each_agent(capsys):
    call_command("agents", "check")
    assert capsys.readouterr().out.splitlines() == ["assistant: ok", "coder: ok", "files: ok", "reimbursement: ok"]


def test_manage_agents_check_names_a_broken_agent_and_fails(capsys, settings):
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "ghost": "nowhere.module.factory"}
    with pytest.raises(CommandError, match="1 agent"):
        call_command("agents", "check")
    assert "ghost: FAILED" in capsys.readouterr().out


def test_manage_agents_check_finds_an_input_schema_that_is_not_json_schema(capsys, settings, outside_package):
    (outside_package / "acme_agents" / "bad.py").write_text(textwrap.dedent('''
        from runs.agents import AgentDefinition
        from runs.runtime import tool
        from runs.runtime.testing import ScriptedModel

        def bad_agent(*, leg=None):
            return AgentDefinition(name="bad", model=ScriptedModel([]),
                                   tools={"t": tool(input_schema={"type": "no-such-type"}, execute=lambda i, c: 1)})
    '''))
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "bad": "acme_agents.bad.bad_agent"}
    with pytest.raises(CommandError):
        call_command("agents", "check")
    assert "tool t: its input_schema is not a valid JSON Schema" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
def test_an_agent_from_a_package_outside_the_project_runs_end_to_end_through_the_api(
    api_client, api_user, outside_package, settings, drain_runs
):
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "echo": "acme_agents.echo.echo_agent"}
    started = api_client.post("/api/runs/", {"agent": "echo", "run_id": "outside-1",
                                             "messages": [{"role": "user", "content": "hi"}]}, format="json")
    assert started.status_code == 201
    drain_runs()
    run = api_client.get("/api/runs/outside-1/").json()
    assert run["status"] == "completed"
    assert texts(follow(api_user, "outside-1")) == "Hello from outside."


def test_an_agent_named_only_in_deuz_agents_runs_end_to_end_through_a_served_api(tmp_path, outside_package):
    # No settings patched: `manage.py serve` (with its embedded worker) finds the agent through the environment alone.
    database = tmp_path / "served.sqlite3"
    env = clean_env(DATABASE_URL=f"sqlite:///{database}", PYTHONPATH=str(outside_package), DEUZ_DEMO_DELAY_MS="0",
                    DEUZ_AGENTS=json.dumps({"echo": "acme_agents.echo.echo_agent"}), **PRODUCTION_ENV)
    served = Served(database=database, env=env)
    try:
        base_url = served.wait_for(r"Deuz is serving at (http://\S+/)").group(1).rstrip("/")
        make_user = "from django.contrib.auth import get_user_model; get_user_model().objects.create_user('outsider')"
        subprocess.run([sys.executable, "manage.py", "shell", "-v", "0", "-c", make_user], cwd=REPO_ROOT, env=env,
                       check=True, capture_output=True, timeout=60)
        key = subprocess.run([sys.executable, "manage.py", "token", "create", "outsider", "--name", "t"], cwd=REPO_ROOT,
                             env=env, check=True, capture_output=True, text=True, timeout=60).stdout.strip()
        client = httpx.Client(base_url=base_url, headers={"Authorization": f"Token {key}"}, timeout=10)
        listed = [agent["name"] for agent in client.get("/api/agents/").json()["results"]]
        assert "echo" in listed
        started = client.post("/api/runs/", json={"agent": "echo", "run_id": "served-echo",
                                                  "messages": [{"role": "user", "content": "hi"}]})
        assert started.status_code == 201, started.text
        wait_until(lambda: client.get("/api/runs/served-echo/").json()["status"] == "completed",
                   what="the served run to complete")
        stream = client.get("/api/runs/served-echo/events/", params={"cursor": -1}).text
        parts = [json.loads(line.removeprefix("data: ")) for line in stream.splitlines()
                 if line.startswith("data: {")]
        assert "".join(part["text"] for part in parts if part["type"] == "text-delta") == "Hello from outside."
    finally:
        served.stop()
