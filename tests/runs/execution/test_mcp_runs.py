"""MCP tools in runs through the worker: the demo ``files`` agent on the real @modelcontextprotocol/server-filesystem
(stdio) and an agent on the test streamable-HTTP server (tests.mcp.server) named by DEUZ_MCP_SERVERS. Reads run
freely, writes wait for a reviewer and are ledgered, a lost server is a result the run reads, and a worker killed
right after a destructive call leaves it for review, never calls it twice."""

from __future__ import annotations

import json
import signal

import pytest

from approvals.models import ApprovalRequest
from runs.models import Effect, JournalEntry, Run
from runs.selectors import run_latest_messages
from runs.services.lifecycle import run_start
from tests.factories import verdict
from tests.mcp.servers import FILESYSTEM_SERVER, HttpServer
from tests.processes import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

GO = [{"role": "user", "content": "go"}]
SECRET = "header-secret-4711"


@pytest.fixture
def server(tmp_path):
    with HttpServer(tmp_path) as running:
        yield running


@pytest.fixture
def records(server, settings, monkeypatch):
    """The records agent registered, its server the test HTTP server; the env a worker process needs."""
    entry = {"url": server.url, "headers": {"Authorization": f"Bearer {SECRET}"}}
    env = {"DEUZ_MCP_SERVERS": json.dumps({"records": entry}),
           "DEUZ_AGENTS": json.dumps({"records": "tests.mcp.agents.records_agent"})}
    monkeypatch.setenv("DEUZ_MCP_SERVERS", env["DEUZ_MCP_SERVERS"])
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "records": "tests.mcp.agents.records_agent"}
    return env


def tool_results(run_id):
    messages = run_latest_messages(run=Run.objects.get(run_id=run_id))
    return {part["tool_name"]: part for message in messages if message["role"] == "tool" for part in message["content"]}


def pending(run_id):
    return list(ApprovalRequest.objects.select_related("run").filter(run__run_id=run_id,
                                                                     status=ApprovalRequest.Status.PENDING))


def everything_shown(run_id) -> str:
    run = Run.objects.get(run_id=run_id)
    rows = [list(JournalEntry.objects.filter(run=run).values_list("part", flat=True)),
            run_latest_messages(run=run), list(Effect.objects.filter(run=run).values()),
            list(ApprovalRequest.objects.filter(run=run).values("tool_name", "input_data"))]
    return json.dumps(rows, default=str)


def test_the_files_agent_reads_without_approval_and_writes_once_after_approval(drain_runs, settings, tmp_path):
    assert FILESYSTEM_SERVER.exists(), "node_modules is missing the MCP filesystem server: run `npm ci`."
    settings.DEUZ_DEMO_FILES_DIR = tmp_path / "files"
    run_start(agent="files", messages=[{"role": "user", "content": "tidy up"}], run_id="f1")
    drain_runs()
    [request] = pending("f1")
    assert request.tool_name == "write_file"
    assert {"list_directory", "read_text_file"} <= set(tool_results("f1"))
    assert not (tmp_path / "files" / "summary.txt").exists()
    verdict(request)
    drain_runs()
    assert Run.objects.get(run_id="f1").status == Run.Status.COMPLETED
    assert (tmp_path / "files" / "summary.txt").read_text().startswith("3 items: Ship the MCP demo.")
    [effect] = Effect.objects.filter(run__run_id="f1")
    assert (effect.tool_name, effect.status) == ("write_file", "committed")


def test_a_read_only_tool_runs_without_approval_and_a_destructive_one_once_after_it(drain_runs, records, server):
    run_start(agent="records", messages=GO, run_id="m1")
    drain_runs()
    assert tool_results("m1")["lookup"]["is_error"] is False
    [request] = pending("m1")
    assert request.tool_name == "delete_record" and server.calls() == []
    verdict(request)
    drain_runs()
    assert Run.objects.get(run_id="m1").status == Run.Status.COMPLETED
    assert server.calls() == [{"tool": "delete_record", "key": "a"}]
    assert Effect.objects.get(run__run_id="m1").status == "committed"


def test_a_server_killed_mid_run_gives_an_is_error_result_and_the_run_finishes(drain_runs, records, server):
    run_start(agent="records", messages=GO, run_id="m2")
    drain_runs()
    server.kill()
    verdict(pending("m2")[0])
    drain_runs()
    result = tool_results("m2")["delete_record"]
    assert (result["is_error"], result["output"]) == (True, "MCP server 'records' is unreachable.")
    assert Run.objects.get(run_id="m2").status == Run.Status.COMPLETED
    shown = everything_shown("m2")
    for secret in (server.url, f"127.0.0.1:{server.port}", SECRET):
        assert secret not in shown


def test_a_tool_gone_by_the_next_leg_is_an_is_error(drain_runs, records, server):
    run_start(agent="records", messages=GO, run_id="m3")
    drain_runs()
    server.kill()
    server.start(without=("delete_record",))  # the same port, one tool fewer
    verdict(pending("m3")[0])
    drain_runs()
    assert tool_results("m3")["delete_record"]["is_error"] is True
    assert server.calls() == []
    assert Run.objects.get(run_id="m3").status == Run.Status.COMPLETED


def test_without_trusted_annotations_the_read_only_tool_waits_for_approval(drain_runs, server, settings, monkeypatch):
    monkeypatch.setenv("DEUZ_MCP_SERVERS", json.dumps({"records": {"url": server.url, "trust_annotations": False}}))
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "records": "tests.mcp.agents.records_agent"}
    run_start(agent="records", messages=GO, run_id="m4")
    drain_runs()
    assert [request.tool_name for request in pending("m4")] == ["lookup"]


def test_a_worker_killed_right_after_the_destructive_call_leaves_it_for_review(drain_runs, records, server, workers):
    run_start(agent="records", messages=GO, run_id="m5")
    drain_runs()
    verdict(pending("m5")[0])
    dies = workers("dies", DEUZ_FAULT="after-effect-commit", **records)
    assert dies.wait_exit() == -signal.SIGKILL
    workers("next", **records)
    wait_until(lambda: Run.objects.get(run_id="m5").status == Run.Status.NEEDS_REVIEW, what="the run to need review")
    assert server.calls() == [{"tool": "delete_record", "key": "a"}]  # not a second call
    effect = Effect.objects.get(run__run_id="m5")
    assert effect.status == "needs_review"
    evidence = list(effect.transitions.values_list("to_status", "via", "note"))
    assert ("attempted", "tool", "Attempt 1.") in evidence
    assert any(status == "needs_review" and "no reconcile" in note for status, _, note in evidence)


def test_a_stopping_worker_closes_the_mcp_sessions_of_its_loop(records, monkeypatch):
    import asyncio

    from asgiref.sync import async_to_sync

    from runs.execution import worker as worker_module
    from runs.execution.worker import Worker
    from runs.runtime import mcp
    from runs.runtime.mcp import mcp_tools

    worker = Worker(worker_id="w", concurrency=1, poll_seconds=0.01)
    seen = {}

    async def run_with_a_session():
        await mcp_tools("records").list_tools()  # as a leg on this loop would
        [seen["session"]] = mcp._SESSIONS[asyncio.get_running_loop()].values()
        worker.stop()
        await worker.run()
        seen["left"] = dict(mcp._SESSIONS.get(asyncio.get_running_loop(), {}))

    monkeypatch.setattr(worker_module, "run_claim", lambda **kwargs: [])
    async_to_sync(run_with_a_session)()
    assert seen["left"] == {} and seen["session"].task.done()
