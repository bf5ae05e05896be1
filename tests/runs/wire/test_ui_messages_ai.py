"""Real runs' journals as UI message streams, read by the real `ai` package (tests/runs/wire/ui_message_stream.mjs):
every chunk validates against its uiMessageChunkSchema (strict in the pinned version), and readUIMessageStream
builds the message a chat front end shows: text, tool parts with their outputs, approval requests naming the
approval's id, denials, a sub-agent's calls, a cancel, a failure, a retry."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from asgiref.sync import async_to_sync

from approvals.models import ApprovalRequest
from runs.wire.followers import follow_open
from runs.wire.ui_messages import UIMessageStreamResponse
from tests.environment import REPO_ROOT
from tests.factories import make_queued_run, make_suspended_run, verdict
from tests.runs.execution import recordings as rec
from tests.runs.execution.conftest import provider  # noqa: F401 (the retry tests' local model API)
from tests.runs.runtime.local_api import JSONReply
from tests.streams import follow, seqs

pytestmark = pytest.mark.django_db(transaction=True)

READER = "tests/runs/wire/ui_message_stream.mjs"


def ui_stream(user, run_id: str, *, cursor: int | None = None, approvals_decided_by: str = "reviewers"):
    """The UI message stream response of ``run_id`` from ``cursor``, as ``user`` follows it, and its body."""

    async def read():
        opened = await follow_open(run_id=run_id, cursor=None if cursor is None else str(cursor),
                                   authenticate=lambda: user, kind="sse")
        response = UIMessageStreamResponse(opened, approvals_decided_by=approvals_decided_by)
        try:
            body = b"".join([piece async for piece in response.streaming_content]).decode()
        finally:
            response.close()
        return response, body

    return async_to_sync(read)()


def read_with_ai(streams: dict[str, str | dict]) -> dict[str, dict]:
    """Each body read by the `ai` package: ``{"chunks": [{"chunk", "issues"}], "message", "errors"}``; a stream
    given as ``{"body", "continues": name}`` continues the message read from ``name``."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("Reading UI message streams needs Node.js: `apt-get install -y nodejs` (.ci/run does).")
    if not (REPO_ROOT / "node_modules" / "ai").is_dir():
        pytest.fail("The ai package is not installed: run `npm ci` (scripts/test does).")
    completed = subprocess.run([node, READER], input=json.dumps(streams), cwd=REPO_ROOT, capture_output=True,
                               text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def read_one(body: str) -> dict:
    read = read_with_ai({"run": body})["run"]
    invalid = [(entry["chunk"], entry["issues"]) for entry in read["chunks"] if entry["issues"]]
    assert invalid == [], invalid
    return read


def parts_of(read: dict, kind: str) -> list[dict]:
    return [part for part in read["message"]["parts"] if part["type"] == kind]


def text_of(read: dict) -> str:
    return "".join(part["text"] for part in parts_of(read, "text"))


def chunk_types(read: dict) -> list[str]:
    return [entry["chunk"]["type"] for entry in read["chunks"]]


def test_an_approved_run_is_one_assistant_message_with_text_and_tool_outputs(drain_runs, owner, reviewer):
    request = make_suspended_run(drain_runs, "ui-ok", user=owner)
    verdict(request, user=reviewer)
    drain_runs()
    read = read_one(ui_stream(owner, "ui-ok")[1])
    message = read["message"]
    assert (message["id"], message["role"], read["errors"]) == ("ui-ok", "assistant", [])
    assert "Expense exp-1042 is 84.20 EUR" in text_of(read)
    lookup, pay = parts_of(read, "tool-lookup_expense")[0], parts_of(read, "tool-pay_expense")[0]
    assert (lookup["state"], lookup["output"]["employee"]) == ("output-available", "Ada Lovelace")
    assert (pay["state"], pay["approval"]) == ("output-available", {"id": request.approval_id})


def test_a_suspended_runs_message_holds_the_approval_request_and_who_may_decide_it(drain_runs, owner):
    request = make_suspended_run(drain_runs, "ui-wait", user=owner)
    read = read_one(ui_stream(owner, "ui-wait", approvals_decided_by="creator")[1])
    pay = parts_of(read, "tool-pay_expense")[0]
    assert (pay["state"], pay["approval"]) == ("approval-requested", {"id": request.approval_id})
    deciders = parts_of(read, "data-deuz-approval")[0]["data"]
    assert (deciders["approval_id"], deciders["approvals_decided_by"]) == (request.approval_id, "creator")
    assert request.token not in json.dumps(read)


def test_a_denied_runs_tool_part_is_denied(drain_runs, owner, reviewer):
    request = make_suspended_run(drain_runs, "ui-no", user=owner)
    verdict(request, approved=False, reason="No.", user=reviewer)
    drain_runs()
    read = read_one(ui_stream(owner, "ui-no")[1])
    assert parts_of(read, "tool-pay_expense")[0]["state"] == "output-denied"
    assert parts_of(read, "data-deuz-tool-approval-verdict")[0]["data"]["reason"] == "No."
    assert text_of(read).endswith("The payment was not made: No.")


def test_a_sub_agents_calls_are_dynamic_tool_parts_the_approval_request_names(drain_runs, owner, reviewer):
    make_queued_run("ui-code", agent="coder", user=owner)
    drain_runs()
    request = ApprovalRequest.objects.get(run__run_id="ui-code")
    verdict(request, user=reviewer)
    drain_runs()
    read = read_one(ui_stream(owner, "ui-code")[1])
    shell = parts_of(read, "dynamic-tool")[0]
    assert (shell["toolName"], shell["state"], shell["approval"]) == ("run_shell", "output-available",
                                                                      {"id": request.approval_id})
    assert parts_of(read, "data-deuz-sub-agent")[0]["data"] == {"tool_call_id": shell["toolCallId"],
                                                                "agent_path": ["coder"]}
    assert parts_of(read, "tool-coder")[0]["state"] == "output-available"
    assert "Running the test suite" not in text_of(read)  # the sub-agent's text is its own, not the answer's


def test_a_cancelled_runs_message_ends_after_the_cancel(drain_runs, owner, token_client):
    make_suspended_run(drain_runs, "ui-stop", user=owner)
    token_client(owner).post("/api/runs/ui-stop/cancel/", {"reason": "Wrong."}, format="json")
    read = read_one(ui_stream(owner, "ui-stop")[1])
    assert chunk_types(read)[-4:] == ["data-deuz-cancelled", "tool-output-denied", "data-deuz-finish", "finish"]
    assert [part["state"] for part in read["message"]["parts"] if part["type"] == "tool-pay_expense"] == [
        "output-denied"]  # the withdrawn request asks nobody any more
    assert read["chunks"][-1]["chunk"]["finishReason"] == "other"
    assert parts_of(read, "data-deuz-cancelled")[0]["data"] == {"by": "olga", "reason": "Wrong."}


def test_a_failed_runs_stream_reports_its_error(provider, drain_runs, owner):  # noqa: F811
    provider(JSONReply(401, rec.UNAUTHORIZED_BODY))
    make_queued_run("ui-bad", user=owner)
    drain_runs()
    read = read_one(ui_stream(owner, "ui-bad")[1])
    assert chunk_types(read)[-2:] == ["error", "finish"]
    assert read["errors"] and read["errors"][0].startswith("AuthenticationError: Error code: 401")


def test_a_retried_runs_stream_notes_the_retry_and_is_no_error(provider, drain_runs, owner):  # noqa: F811
    provider(rec.LOOKUP, JSONReply(429, rec.RATE_LIMITED_BODY), rec.ANSWER)
    make_queued_run("ui-retry", user=owner)
    drain_runs()
    read = read_one(ui_stream(owner, "ui-retry")[1])
    assert read["errors"] == [] and "error" not in chunk_types(read)
    assert {"data-deuz-error", "data-deuz-retry", "data-deuz-recovery"} <= {part["type"] for part in
                                                                           read["message"]["parts"]}
    assert text_of(read).endswith("in the books; nothing to pay.")


def test_a_stream_from_a_cursor_continues_the_message_without_doubling(drain_runs, owner, reviewer):
    request = make_suspended_run(drain_runs, "ui-cont", user=owner)
    cursor = seqs(follow(owner, "ui-cont"))[-1]
    before = ui_stream(owner, "ui-cont")[1]
    verdict(request, user=reviewer)
    drain_runs()
    read = read_with_ai({"before": before, "after": {"body": ui_stream(owner, "ui-cont", cursor=cursor)[1],
                                                     "continues": "before"},
                         "whole": ui_stream(owner, "ui-cont")[1]})
    assert all(not entry["issues"] for entry in read["after"]["chunks"])
    assert read["after"]["message"] == read["whole"]["message"]
    assert chunk_types(read["after"])[:3] == ["start", "data-deuz-tool-approval-verdict", "tool-output-available"]


def test_the_response_is_an_event_stream_with_the_ai_sdk_header_and_ends_with_done(drain_runs, owner):
    make_suspended_run(drain_runs, "ui-head", user=owner)
    response, body = ui_stream(owner, "ui-head")
    assert (response["Content-Type"], response["x-vercel-ai-ui-message-stream"]) == ("text/event-stream", "v1")
    assert body.endswith("\n\ndata: [DONE]\n\n") and body.count("[DONE]") == 1
