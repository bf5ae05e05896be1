"""The AI SDK chat wire through Django's test client (runs.api.chat_views): who may send, read and decide, what is
refused and how, the stream's bytes. The real `ai` package drives a live server in tests/runs/wire/test_chat_ai.py."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from approvals.models import ApprovalRequest
from approvals.roles import FOUR_EYES, SUPPORT_GROUP
from runs.models import Run, Thread
from tests.factories import make_user

pytestmark = pytest.mark.django_db

ASK = "Tell Ada the build is green"


def user_message(text: str, message_id: str = "m1") -> dict:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def body(text: str = ASK, *, chat_id: str = "c1", agent: str | None = "assistant", **more) -> dict:
    sent = {"id": chat_id, "messages": [user_message(text)], "trigger": "submit-message", **more}
    if agent is not None:
        sent["agent"] = agent
    return sent


def send(client, sent: dict, path: str = "/api/chat", **headers):
    return client.post(path, sent, format="json", headers=headers)


async def _joined(chunks) -> list[bytes]:
    return [chunk async for chunk in chunks]


def read(response) -> str:
    """The streamed body (the turn must have ended, or this waits for it). The test client closes the response once
    it is read; a response left unread gives its stream back when it is collected."""
    return b"".join(async_to_sync(_joined)(response.streaming_content)).decode()


def chunks_of(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: {")]


def answer(approval: ApprovalRequest, *, approved: bool = True, chat_id: str = "c1", reason: str | None = None) -> dict:
    """The body useChat sends after addToolApprovalResponse: the assistant message with the answered tool part."""
    response = {"id": approval.approval_id, "approved": approved, **({"reason": reason} if reason else {})}
    part = {"type": f"tool-{approval.tool_name}", "toolCallId": approval.tool_call_id, "state": "approval-responded",
            "input": approval.tool_input, "approval": response}
    return {"id": chat_id, "trigger": "submit-message", "messageId": approval.run.run_id,
            "messages": [{"id": approval.run.run_id, "role": "assistant", "parts": [{"type": "step-start"}, part]}]}


@pytest.fixture
def owner_client(token_client, owner):
    return token_client(owner)


@pytest.fixture
def suspended_chat(owner_client, drain_runs):
    """Olga's assistant chat c1, its first turn suspended on sending the message (her own approval)."""
    send(owner_client, body())
    drain_runs()
    return ApprovalRequest.objects.get(run__thread__thread_id="c1")


def test_a_first_message_starts_the_thread_for_its_user_and_streams_the_turn(owner_client, owner, drain_runs):
    response = send(owner_client, body())
    drain_runs()
    text = read(response)
    run = Run.objects.get(thread__thread_id="c1")
    assert (response.status_code, response["Content-Type"], response["x-vercel-ai-ui-message-stream"]) == (
        200, "text/event-stream", "v1")
    assert Thread.objects.get(thread_id="c1").created_by == owner
    assert chunks_of(text)[0] == {"type": "start", "messageId": run.run_id}
    assert {"type": "tool-approval-request", "approvalId": ApprovalRequest.objects.get(run=run).approval_id,
            "toolCallId": ApprovalRequest.objects.get(run=run).tool_call_id} in chunks_of(text)
    assert text.endswith("data: [DONE]\n\n")


def test_the_path_without_its_slash_and_with_it_are_the_same_endpoint(owner_client):
    send(owner_client, body(chat_id="c1"))
    send(owner_client, body(chat_id="c2"), path="/api/chat/")
    assert Run.objects.filter(thread__thread_id__in=["c1", "c2"]).count() == 2


def test_only_the_last_user_messages_text_becomes_the_turn(owner_client):
    sent = body()
    sent["messages"] = [user_message("Tell Bob nothing", "m0"), {"id": "a0", "role": "assistant", "parts": []},
                        user_message(ASK)]
    send(owner_client, sent)
    assert Run.objects.get(thread__thread_id="c1").input_messages == json.dumps([{"role": "user", "content": ASK}])


def test_a_file_part_is_read_as_the_messages_file(owner_client):
    sent = body()
    sent["messages"][0]["parts"].append({"type": "file", "mediaType": "text/plain", "filename": "note.txt",
                                         "url": "data:text/plain;base64,aGVsbG8="})
    send(owner_client, sent)
    (run,) = Run.objects.filter(thread__thread_id="c1")
    messages = owner_client.get("/api/chat/c1/messages").json()
    assert messages[0]["parts"][1] == {"type": "file", "mediaType": "text/plain", "url": "data:text/plain;base64,aGVsbG8=",
                                       "filename": "note.txt"}
    assert messages[0]["id"] == f"{run.run_id}:user"


def test_regenerate_is_a_422_and_starts_nothing(owner_client):
    response = send(owner_client, body(trigger="regenerate-message"))
    assert (response.status_code, response["Content-Type"]) == (422, "application/json")
    assert not Run.objects.exists()


def test_another_agent_than_the_threads_is_a_409(owner_client, suspended_chat):
    suspended_chat.run.status = Run.Status.COMPLETED  # as if the turn had ended
    suspended_chat.run.save(update_fields=["status"])
    response = send(owner_client, body("Tell Bob hi", agent="reimbursement"))
    assert response.status_code == 409
    assert "agent" in response.json()
    assert Run.objects.filter(thread__thread_id="c1").count() == 1


def test_a_message_while_a_turn_is_active_is_a_409_naming_it(owner_client):
    send(owner_client, body())
    response = send(owner_client, body("And Bob?"))
    assert response.status_code == 409
    assert response.json()["active_run_id"] == Run.objects.get(thread__thread_id="c1").run_id


def test_a_new_chat_without_its_agent_is_a_422_naming_agent(owner_client):
    response = send(owner_client, body(agent=None))
    assert response.status_code == 422
    assert "agent" in response.json()
    assert not Thread.objects.exists()


@pytest.mark.parametrize("parts", [[], [{"type": "text", "text": "  "}], [{"type": "step-start"}],
                                   [{"type": "file", "mediaType": "image/png", "url": "https://example.com/a.png"}]])
def test_a_last_user_message_without_text_or_a_data_file_is_a_422_naming_messages(owner_client, parts):
    sent = body()
    sent["messages"][0]["parts"] = parts
    response = send(owner_client, sent)
    assert response.status_code == 422
    assert "messages" in response.json()


@pytest.mark.parametrize("change", [{"messages": []}, {"messages": [5]}, {"id": "a b"}, {"trigger": "go"},
                                    {"extra": 1}, {"agent": "nobody"}])
def test_a_malformed_body_is_a_400(owner_client, change):
    response = send(owner_client, {**body(), **change})
    assert response.status_code == 400


def test_another_user_is_told_the_chat_does_not_exist(token_client, suspended_chat):
    pat = token_client(make_user("pat"))
    assert send(pat, body("Tell Bob hi")).status_code == 404
    assert send(pat, answer(suspended_chat)).status_code == 404
    assert pat.get("/api/chat/c1/stream").status_code == 404
    assert pat.get("/api/chat/c1/messages").status_code == 404
    assert ApprovalRequest.objects.get(pk=suspended_chat.pk).status == ApprovalRequest.Status.PENDING


def test_support_reads_a_chat_but_sends_no_message(token_client, suspended_chat):
    sue = token_client(make_user("sue", SUPPORT_GROUP))
    assert sue.get("/api/chat/c1/messages").status_code == 200
    assert sue.get("/api/chat/c1/stream").status_code == 204
    assert send(sue, body("Tell Bob hi", agent=None)).status_code == 403


@pytest.mark.django_db(transaction=True)  # the approved tool writes the sandbox from the worker's connection
def test_the_creator_decides_their_assistants_approval_and_gets_the_turn_from_there(owner_client, owner,
                                                                                    suspended_chat, drain_runs):
    response = send(owner_client, answer(suspended_chat))
    decided = ApprovalRequest.objects.get(pk=suspended_chat.pk)
    assert (response.status_code, decided.status, decided.decided_by) == (200, "approved", owner)
    drain_runs()
    chunks = chunks_of(read(response))
    assert [chunk["type"] for chunk in chunks[:3]] == ["start", "data-deuz-tool-approval-verdict",
                                                       "tool-output-available"]
    assert chunks[0]["messageId"] == suspended_chat.run.run_id
    assert not any(chunk["type"] == "tool-approval-request" for chunk in chunks)  # no replay of earlier chunks


def test_a_denial_from_the_chat_carries_its_reason(owner_client, suspended_chat, drain_runs):
    response = send(owner_client, answer(suspended_chat, approved=False, reason="Not now."))
    drain_runs()
    chunks = chunks_of(read(response))
    assert {"type": "tool-output-denied", "toolCallId": suspended_chat.tool_call_id} in chunks
    assert ApprovalRequest.objects.get(pk=suspended_chat.pk).reason == "Not now."


def test_a_reader_who_may_not_decide_gets_403_and_nothing_is_decided(token_client, suspended_chat):
    sue = token_client(make_user("sue", SUPPORT_GROUP))
    response = send(sue, answer(suspended_chat))
    assert response.status_code == 403
    assert ApprovalRequest.objects.get(pk=suspended_chat.pk).status == ApprovalRequest.Status.PENDING


def own_reimbursement_answered(client, drain_runs):
    """``client``'s user starts a reimbursement chat (reviewers decide) and answers its approval: (request, answer)."""
    send(client, body("Reimburse exp-1042", agent="reimbursement"))
    drain_runs()
    approval = ApprovalRequest.objects.get(run__thread__thread_id="c1")
    return approval, send(client, answer(approval))


def test_the_creator_of_a_chat_whose_agent_reviewers_decide_gets_403(owner_client, drain_runs):
    approval, response = own_reimbursement_answered(owner_client, drain_runs)
    assert response.status_code == 403
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalRequest.Status.PENDING


def test_a_reviewer_answering_their_own_reviewers_chat_is_told_why_four_eyes(reviewer_client, drain_runs):
    approval, response = own_reimbursement_answered(reviewer_client, drain_runs)
    assert response.status_code == 403
    assert response.json()["detail"] == FOUR_EYES  # not that they lack the reviewer permission, which they have
    assert ApprovalRequest.objects.get(pk=approval.pk).status == ApprovalRequest.Status.PENDING


@pytest.mark.django_db(transaction=True)
def test_a_reviewer_decides_a_chat_they_may_read(owner_client, reviewer, reviewer_client, drain_runs):
    send(owner_client, body("Reimburse exp-1042", agent="reimbursement"))
    drain_runs()
    approval = ApprovalRequest.objects.get(run__thread__thread_id="c1")
    response = send(reviewer_client, answer(approval))
    assert response.status_code == 200
    assert ApprovalRequest.objects.get(pk=approval.pk).decided_by == reviewer


def test_an_answer_already_decided_is_a_409(owner_client, suspended_chat):
    send(owner_client, answer(suspended_chat))
    response = send(owner_client, answer(suspended_chat))
    assert response.status_code == 409


def test_an_assistant_message_with_no_answered_approval_is_a_422(owner_client, suspended_chat):
    sent = answer(suspended_chat)
    sent["messages"][0]["parts"][1]["state"] = "approval-requested"
    response = send(owner_client, sent)
    assert (response.status_code, response.json()["messages"][0][:40]) == (422, "The last message is the assistant's, wit")


def test_a_session_post_needs_the_csrf_token_and_a_token_post_does_not(owner, owner_client, settings):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    refused = browser.post("/api/chat", body(), content_type="application/json")
    assert (refused.status_code, refused["Content-Type"]) == (403, "application/json")
    assert not Run.objects.exists()
    browser.cookies[settings.CSRF_COOKIE_NAME] = "t" * 32  # the token a page gives the browser (unmasked)
    accepted = browser.post("/api/chat", body(), content_type="application/json", headers={"X-CSRFToken": "t" * 32})
    assert accepted.status_code == 200
    token_post = send(owner_client, body(chat_id="c2"))
    assert token_post.status_code == 200


def test_the_stream_is_204_without_a_turn_and_while_suspended(owner_client, suspended_chat):
    owner_client.post("/api/threads/", {"agent": "assistant", "thread_id": "empty"}, format="json")
    assert owner_client.get("/api/chat/empty/stream").status_code == 204
    assert owner_client.get("/api/chat/c1/stream/").status_code == 204


def test_the_stream_of_a_queued_turn_replays_it_from_its_first_chunk(owner_client, drain_runs):
    send(owner_client, body())
    response = owner_client.get("/api/chat/c1/stream")
    drain_runs()
    chunks = chunks_of(read(response))
    assert response.status_code == 200
    assert [chunk["type"] for chunk in chunks[:2]] == ["start", "start-step"]
    assert chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}


def test_the_messages_are_each_turns_user_message_and_answer(owner_client, suspended_chat):
    messages = owner_client.get("/api/chat/c1/messages/").json()
    run_id = suspended_chat.run.run_id
    assert [(message["id"], message["role"]) for message in messages] == [(f"{run_id}:user", "user"),
                                                                           (run_id, "assistant")]
    assert messages[0]["parts"] == [{"type": "text", "text": ASK}]
    tools = {part["type"]: part for part in messages[1]["parts"] if part["type"].startswith("tool-")}
    assert tools["tool-find_contact"]["state"] == "output-available"
    assert tools["tool-send_message"]["approval"] == {"id": suspended_chat.approval_id}


def test_an_active_turns_answer_is_left_to_the_stream_its_user_message_is_listed(owner_client, suspended_chat):
    run = suspended_chat.run
    run.status = Run.Status.RUNNING  # as when a verdict has queued it again and a worker runs it
    run.save(update_fields=["status"])
    messages = owner_client.get("/api/chat/c1/messages/").json()
    assert [(message["id"], message["role"]) for message in messages] == [(f"{run.run_id}:user", "user")]


def test_an_idempotency_key_replays_the_turns_stream_and_starts_nothing(owner_client, drain_runs):
    first = send(owner_client, body(), **{"Idempotency-Key": "k1"})
    again = send(owner_client, body(), **{"Idempotency-Key": "k1"})
    drain_runs()
    chunks = chunks_of(read(again))
    run = Run.objects.get(thread__thread_id="c1")
    assert (again.status_code, again["Idempotent-Replayed"]) == (200, "true")
    assert chunks[:2] == [{"type": "start", "messageId": run.run_id}, {"type": "start-step"}]


def test_the_same_key_with_another_body_is_a_422(owner_client):
    send(owner_client, body(), **{"Idempotency-Key": "k1"})
    assert send(owner_client, body("Tell Bob hi", chat_id="c2"), **{"Idempotency-Key": "k1"}).status_code == 422


def test_signed_out_is_a_401(anonymous_client):
    assert send(anonymous_client, body()).status_code == 401
    assert anonymous_client.get("/api/chat/c1/stream").status_code == 401
