"""``GET /api/chat/{id}/messages`` (runs.wire.ui_transcript, ui_messages.ui_message_fold) agrees with the real `ai`
package: each turn's assistant message is exactly what readUIMessageStream builds from the turn's whole UI message
stream, so a reload shows what the stream showed; the user message is a UIMessage of the text it was sent."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from runs.models import Run
from tests.factories import verdict
from tests.runs.wire.test_ui_messages_ai import read_one, ui_stream

pytestmark = pytest.mark.django_db(transaction=True)

ASKED = {"reimbursement": "Reimburse exp-1042", "coder": "Fix the failing test", "assistant": "Tell Ada it works"}


def chat_turn(token_client, owner, drain_runs, agent: str, decision: bool | None, reviewer) -> tuple[list, Run]:
    client = token_client(owner)
    client.post("/api/threads/", {"agent": agent, "thread_id": "t1"}, format="json")
    client.post("/api/threads/t1/messages/", {"content": ASKED[agent]}, format="json")
    drain_runs()
    if decision is not None:
        verdict(ApprovalRequest.objects.get(run__thread__thread_id="t1"), approved=decision,
                user=owner if agent == "assistant" else reviewer)
        drain_runs()
    return client.get("/api/chat/t1/messages").json(), Run.objects.get(thread__thread_id="t1")


@pytest.mark.parametrize(("agent", "decision"), [("reimbursement", True), ("reimbursement", False),
                                                 ("reimbursement", None), ("coder", True), ("assistant", True)])
def test_each_turns_answer_is_what_read_ui_message_stream_builds(token_client, owner, reviewer, drain_runs, agent,
                                                                 decision):
    messages, run = chat_turn(token_client, owner, drain_runs, agent, decision, reviewer)
    decided_by = "creator" if agent == "assistant" else "reviewers"
    read = read_one(ui_stream(owner, run.run_id, approvals_decided_by=decided_by)[1])
    assert messages[1] == read["message"]
    assert messages[0] == {"id": f"{run.run_id}:user", "role": "user", "parts": [{"type": "text", "text": ASKED[agent]}]}
