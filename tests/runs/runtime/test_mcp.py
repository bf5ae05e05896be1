"""MCP tools (``runs.runtime.mcp``), pure: the runtime against a real streamable-HTTP MCP server (built with the mcp
package's server API, in its own process so it can be killed) and the real @modelcontextprotocol/server-filesystem
over stdio; in-memory stores and ledger, a scripted model, no Django."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from runs.runtime import Deps, generate_text
from runs.runtime.durable import EffectNeedsReview, InMemoryEffectLedger, InMemorySessionStore, resume_from_checkpoint
from runs.runtime.mcp import aclose_mcp_sessions, mcp_server, mcp_servers_problems, mcp_tools
from runs.runtime.testing import ScriptedModel
from tests.runs.runtime.ledger import Crash, crash_at
from tests.mcp.servers import REPO, HttpServer, environment_without_django, filesystem_server_args

SECRET_HEADER = "Bearer header-secret-4711"


@pytest.fixture
def server(tmp_path):
    with HttpServer(tmp_path) as running:
        yield running


@pytest.fixture(autouse=True)
async def close_sessions():
    yield
    await aclose_mcp_sessions()


def calling(*calls, final="done"):
    """A model that makes each call in turn (one per step), then answers ``final``."""
    script = [
        {"content": [{"type": "tool_call", "tool_call_id": f"call-{i}", "tool_name": name, "input": tool_input}]}
        for i, (name, tool_input) in enumerate(calls)
    ]
    return ScriptedModel([*script, {"content": [{"type": "text", "text": final}]}])


def results(messages):
    return [part for message in messages if message["role"] == "tool" for part in message["content"]]


def http_tools(server, **options):
    trust = options.pop("trust_annotations", True)
    return mcp_tools(
        mcp_server("records", url=server.url, headers={"Authorization": SECRET_HEADER}, trust_annotations=trust),
        **options,
    )


async def run(model, tools, *, run_id="r1", store=None, ledger=None, max_steps=4):
    store = store or InMemorySessionStore()
    ledger = ledger or InMemoryEffectLedger()
    result = await generate_text(
        model=model, messages=[{"role": "user", "content": "go"}], tools=tools, max_steps=max_steps,
        session={"store": store, "run_id": run_id}, effect_ledger=ledger.fenced(run_id, ledger.claim(run_id)),
    )
    return result, store, ledger


async def test_a_read_only_tool_runs_without_approval_and_without_a_ledger_entry(server):
    result, _, ledger = await run(calling(("lookup", {"key": "a"})), http_tools(server))
    assert result.pending_approvals == []
    [outcome] = results(result.messages)
    assert outcome["is_error"] is False
    assert outcome["output"] == {"result": "record a: 42"}
    assert ledger.entries() == []


async def test_a_destructive_tool_waits_for_approval_and_runs_once_after_it(server):
    model = calling(("delete_record", {"key": "a"}))
    result, store, ledger = await run(model, http_tools(server))
    assert result.finish_reason == "suspended"
    assert server.calls() == []
    [request] = result.pending_approvals
    resumed = await resume_from_checkpoint(
        store, "r1", model=model, tools=http_tools(server), max_steps=4,
        approval_responses=[{"approval_id": request["approval_id"], "approved": True}],
        effect_ledger=ledger.fenced("r1", ledger.claim("r1")),
    )
    assert resumed.finish_reason == "stop"
    assert server.calls() == [{"tool": "delete_record", "key": "a"}]
    [entry] = ledger.entries()
    assert entry["status"] == "committed"


async def test_the_model_sees_each_tool_under_the_prefix(server):
    model = calling(("rec_lookup", {"key": "a"}))
    result, _, _ = await run(model, [http_tools(server, prefix="rec_", include=["lookup", "delete_record"])])
    assert sorted(spec["name"] for spec in model.requests[0]["tools"]) == ["rec_delete_record", "rec_lookup"]
    assert results(result.messages)[0]["is_error"] is False


async def test_a_server_killed_mid_run_gives_an_is_error_result_and_the_run_finishes(server):
    def kill_then_call(request):
        server.kill()  # after the leg listed its tools, before the call
        return {"content": [{"type": "tool_call", "tool_call_id": "c1", "tool_name": "lookup", "input": {"key": "a"}}]}

    model = ScriptedModel([kill_then_call, {"content": [{"type": "text", "text": "sorry"}]}])
    result, _, _ = await run(model, http_tools(server))
    [outcome] = results(result.messages)
    assert outcome["is_error"] is True
    assert outcome["output"] == "MCP server 'records' is unreachable."
    assert result.finish_reason == "stop"


async def test_a_slow_server_gives_an_is_error_result_in_time_and_the_run_finishes(server, monkeypatch):
    import gc

    from runs.runtime import mcp

    monkeypatch.setattr(mcp, "CALL_TIMEOUT_SECONDS", 1.0)  # slow_delete answers after 30 s
    lost = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: lost.append(context["message"]))
    model = calling(("slow_delete", {"key": "a"}), final="gave up")
    started = asyncio.get_running_loop().time()
    result, _, _ = await run(model, http_tools(server, needs_approval=False, effect=False))
    [outcome] = results(result.messages)
    assert (outcome["is_error"], outcome["output"]) == (
        True, "MCP server 'records' did not answer the call of 'slow_delete' in time.")
    assert result.finish_reason == "stop" and result.text == "gave up"
    assert asyncio.get_running_loop().time() - started < 15
    del result, outcome
    await asyncio.sleep(0.2)  # the session closes behind the call it gave up on
    gc.collect()
    assert lost == []  # that call's late failure is not logged as an error nobody retrieved


async def test_a_pending_call_whose_server_is_gone_at_the_next_leg_is_an_is_error(server):
    model = calling(("delete_record", {"key": "a"}))
    result, store, ledger = await run(model, http_tools(server))
    server.kill()
    resumed = await resume_from_checkpoint(
        store, "r1", model=model, tools=http_tools(server), max_steps=4,
        approval_responses=[{"approval_id": result.pending_approvals[0]["approval_id"], "approved": True}],
        effect_ledger=ledger.fenced("r1", ledger.claim("r1")),
    )
    outcome = results(resumed.messages)[0]
    assert (outcome["is_error"], outcome["output"]) == (True, "MCP server 'records' is unreachable.")
    assert resumed.finish_reason == "stop"


async def test_a_tool_gone_by_the_next_leg_is_an_is_error(server):
    model = calling(("delete_record", {"key": "a"}))
    result, store, ledger = await run(model, http_tools(server))
    server.kill()
    server.start(without=("delete_record",))  # the same port, one tool fewer
    resumed = await resume_from_checkpoint(
        store, "r1", model=model, tools=http_tools(server), max_steps=4,
        approval_responses=[{"approval_id": result.pending_approvals[0]["approval_id"], "approved": True}],
        effect_ledger=ledger.fenced("r1", ledger.claim("r1")),
    )
    outcome = results(resumed.messages)[0]
    assert outcome["is_error"] is True
    assert "delete_record" in outcome["output"]
    assert server.calls() == []
    assert resumed.finish_reason == "stop"


async def test_a_ledgered_call_whose_server_dies_during_it_needs_review_and_is_not_repeated(server):
    def call_then_kill_soon(request):
        asyncio.get_running_loop().call_later(1.0, server.kill)
        return {"content": [{"type": "tool_call", "tool_call_id": "c1", "tool_name": "slow_delete", "input": {"key": "a"}}]}

    model = ScriptedModel([call_then_kill_soon, {"content": [{"type": "text", "text": "?"}]}])
    ledger = InMemoryEffectLedger()
    with pytest.raises(Exception) as raised:
        await run(model, http_tools(server, needs_approval=False), ledger=ledger)
    assert isinstance(raised.value, EffectNeedsReview)
    [entry] = ledger.entries()
    assert entry["status"] == "needs_review"
    assert server.calls() == [{"tool": "slow_delete", "key": "a"}]


async def crash_after_the_call_then_resume(server, name):
    """A leg that dies right after the tool returned (before its result is recorded), then the next leg."""
    model = calling((name, {"key": "a"}))
    store, ledger = InMemorySessionStore(), InMemoryEffectLedger()
    with pytest.raises(Crash):
        await generate_text(
            model=model, messages=[{"role": "user", "content": "go"}], tools=http_tools(server, needs_approval=False),
            max_steps=4, session={"store": store, "run_id": "r1"}, effect_ledger=ledger.fenced("r1", ledger.claim("r1")),
            deps=Deps(fault=crash_at("after-effect-commit")),
        )
    outcome = None
    try:
        outcome = await resume_from_checkpoint(
            store, "r1", model=model, tools=http_tools(server, needs_approval=False), max_steps=4,
            effect_ledger=ledger.fenced("r1", ledger.claim("r1")),
        )
    except EffectNeedsReview:
        pass
    return outcome, ledger


async def test_a_destructive_call_whose_leg_died_after_it_needs_review_and_is_not_repeated(server):
    outcome, ledger = await crash_after_the_call_then_resume(server, "delete_record")
    assert outcome is None
    assert [entry["status"] for entry in ledger.entries()] == ["needs_review"]
    assert server.calls() == [{"tool": "delete_record", "key": "a"}]


async def test_an_idempotent_call_whose_leg_died_after_it_is_called_again_with_the_same_input(server):
    outcome, ledger = await crash_after_the_call_then_resume(server, "set_flag")
    assert outcome is not None and outcome.finish_reason == "stop"
    assert [entry["status"] for entry in ledger.entries()] == ["committed"]
    assert server.calls() == [{"tool": "set_flag", "key": "a"}] * 2


async def test_without_trusted_annotations_a_read_only_tool_needs_approval(server):
    result, _, _ = await run(calling(("lookup", {"key": "a"})), http_tools(server, trust_annotations=False))
    assert result.finish_reason == "suspended"
    assert [request["tool_name"] for request in result.pending_approvals] == ["lookup"]


async def test_no_error_shows_the_servers_url_headers_command_or_environment(server):
    def kill_then_call(request):
        server.kill()
        return {"content": [{"type": "tool_call", "tool_call_id": "c1", "tool_name": "lookup", "input": {"key": "a"}}]}

    model = ScriptedModel([kill_then_call, {"content": [{"type": "text", "text": "sorry"}]}])
    result, store, _ = await run(model, http_tools(server))
    stdio = mcp_tools(mcp_server("local", command="/nonexistent/secret-command", args=["--token", "arg-secret-99"],
                                 env={"API_TOKEN": "env-secret-77"}))
    result2, store2, _ = await run(calling(("anything", {})), stdio, run_id="r2")
    shown = json.dumps([result.messages, result2.messages, store.load("r1"), store2.load("r2")], default=str)
    assert "MCP server 'local' is unreachable." in shown
    for secret in (server.url, str(server.port), "header-secret-4711", "secret-command", "arg-secret-99",
                   "env-secret-77"):
        assert secret not in shown


def test_a_server_is_read_from_deuz_mcp_servers(monkeypatch):
    monkeypatch.setenv("DEUZ_MCP_SERVERS", json.dumps(
        {"files": {"command": "node", "args": ["x.js"], "env": {"A": "b"}, "trust_annotations": False}}
    ))
    server = mcp_server("files")
    assert (server.command, server.args, server.env, server.trust_annotations) == ("node", ("x.js",), (("A", "b"),), False)


@pytest.mark.parametrize("entry", [
    {"command": "secret-cmd-1", "url": "http://secret-host-2/mcp"},
    {"command": "secret-cmd-1", "args": "not-a-list"},
    {"url": "ftp://secret-host-2/"},
    {"command": "secret-cmd-1", "env": {"TOKEN": 7}},
    "secret-cmd-1",
])
def test_a_malformed_entry_is_an_error_naming_the_entry_not_its_values(monkeypatch, entry):
    monkeypatch.setenv("DEUZ_MCP_SERVERS", json.dumps({"files": entry}))
    with pytest.raises(ValueError) as raised:
        mcp_server("files")
    assert "'files'" in str(raised.value)
    assert "secret" not in str(raised.value)


def test_each_malformed_entry_is_a_start_up_problem_naming_it(monkeypatch):
    monkeypatch.setenv("DEUZ_MCP_SERVERS", json.dumps({"good": {"url": "http://h/mcp"}, "bad": {"args": ["secret-x"]}}))
    [problem] = mcp_servers_problems()
    assert "'bad'" in problem and "secret" not in problem


def test_a_missing_entry_is_an_error_naming_it(monkeypatch):
    monkeypatch.setenv("DEUZ_MCP_SERVERS", json.dumps({"other": {"url": "http://secret-host/mcp"}}))
    with pytest.raises(LookupError, match="'files'") as raised:
        mcp_server("files")
    assert "secret" not in str(raised.value)


async def test_legs_on_one_loop_share_one_session_closed_by_aclose_mcp_sessions(server):
    from runs.runtime import mcp

    tools = http_tools(server)
    await run(calling(("lookup", {"key": "a"})), tools, run_id="r1")
    [session] = mcp._SESSIONS[asyncio.get_running_loop()].values()
    await run(calling(("lookup", {"key": "b"})), tools, run_id="r2")
    assert list(mcp._SESSIONS[asyncio.get_running_loop()].values()) == [session]
    assert await aclose_mcp_sessions() == 1
    assert session.task.done()


def test_a_loop_that_ends_closes_its_stdio_session_and_its_server_process(tmp_path):
    # A fresh interpreter: asyncio.run cancels the session's task as its loop ends; the server process exits.
    command, args = filesystem_server_args(tmp_path)
    script = f"""
import asyncio, psutil
from runs.runtime.mcp import mcp_server, mcp_tools
async def main():
    await mcp_tools(mcp_server("fs", command={command!r}, args={args!r})).list_tools()
    return [child.pid for child in psutil.Process().children(recursive=True)]
children = asyncio.run(main())
assert children, "no server process"
print(sum(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in children))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=environment_without_django(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "0"


async def test_the_filesystem_server_reads_without_approval_and_writes_after_approval(tmp_path):
    folder = (tmp_path / "sandbox").resolve()
    folder.mkdir()
    (folder / "notes.txt").write_text("remember the milk")
    command, args = filesystem_server_args(folder)
    files = mcp_tools(mcp_server("filesystem", command=command, args=args))
    model = calling(("read_text_file", {"path": str(folder / "notes.txt")}),
                    ("write_file", {"path": str(folder / "todo.txt"), "content": "buy milk"}))
    result, store, ledger = await run(model, files)
    assert "remember the milk" in json.dumps(results(result.messages)[0]["output"])
    assert [request["tool_name"] for request in result.pending_approvals] == ["write_file"]
    assert not (folder / "todo.txt").exists()
    resumed = await resume_from_checkpoint(
        store, "r1", model=model, tools=files, max_steps=4,
        approval_responses=[{"approval_id": result.pending_approvals[0]["approval_id"], "approved": True}],
        effect_ledger=ledger.fenced("r1", ledger.claim("r1")),
    )
    assert resumed.finish_reason == "stop"
    assert (folder / "todo.txt").read_text() == "buy milk"
    assert [entry["tool_name"] for entry in ledger.entries()] == ["write_file"]


async def test_a_toolset_stands_beside_plain_tools_in_a_list(server):
    from runs.runtime import tool

    echo = tool(name="echo", execute=lambda tool_input, ctx: "echoed")
    model = calling(("echo", {}), ("lookup", {"key": "a"}))
    result, _, _ = await run(model, [echo, http_tools(server, include=["lookup"])])
    assert [spec["name"] for spec in model.requests[0]["tools"]] == ["lookup", "echo"]
    assert [part["is_error"] for part in results(result.messages)] == [False, False]


async def test_a_toolset_returned_by_prepare_step_is_listed_for_that_step(server):
    model = calling(("lookup", {"key": "a"}))
    result = await generate_text(
        model=model, messages=[{"role": "user", "content": "go"}], tools={}, max_steps=3,
        prepare_step=lambda ctx: {"tools": http_tools(server, include=["lookup"])},
    )
    assert [spec["name"] for spec in model.requests[0]["tools"]] == ["lookup"]
    assert results(result.messages)[0]["output"] == {"result": "record a: 42"}
