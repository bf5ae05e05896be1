"""The chat pages with Django's client: who may list, read, write and decide (roles as for threads: the creator
writes, support and reviewers read every thread, anyone else gets 404; deciding follows approvals.roles), what a
page shows of each turn, and the message box closed while a turn is active."""

from __future__ import annotations

import re

import pytest

from approvals.models import ApprovalRequest
from demo.models import SandboxMessage
from runs.models import Run, Thread
from runs.services.threads import thread_message_add, thread_start
from tests.csp import csp_problems

pytestmark = pytest.mark.django_db(transaction=True)  # the sandboxes write from the tools' own threads


@pytest.fixture
def chat(users, drain_runs):
    """olga's assistant thread c1, its first turn waiting for her own approval to send a message."""
    def make(agent: str = "assistant", text: str = "Tell Ada the build is green", thread_id: str = "c1") -> Run:
        thread_start(agent=agent, user=users["owner"], thread_id=thread_id)
        run = thread_message_add(thread_id=thread_id, content=text, user=users["owner"])
        drain_runs()
        return Run.objects.get(pk=run.pk)

    return make


def pending(run: Run) -> ApprovalRequest:
    return ApprovalRequest.objects.get(run=run, status=ApprovalRequest.Status.PENDING)


def decide_path(run: Run, request: ApprovalRequest) -> str:
    return f"/chat/{run.thread.thread_id}/turns/{run.run_id}/approvals/{request.approval_id}/"


def test_the_chat_list_sends_a_visitor_without_a_login_to_sign_in(client):
    response = client.get("/chat/")
    assert (response.status_code, response.url) == (302, "/accounts/login/?next=/chat/")


def test_the_chat_list_shows_only_the_users_own_threads(browser_for, chat):
    chat()
    assert 'data-thread-id="c1"' in browser_for("owner").get("/chat/").content.decode()
    assert 'data-thread-id="c1"' not in browser_for("support").get("/chat/").content.decode()


def test_a_new_chat_starts_a_thread_with_its_first_turn_and_opens_it(browser_for, users):
    response = browser_for("plain").post("/chat/", {"agent": "assistant", "content": "Tell Ada hello"})
    thread = Thread.objects.get()
    assert response.status_code == 302 and response.url == f"/chat/{thread.thread_id}/"
    turn = thread.turns.get()
    assert (thread.created_by, thread.agent, turn.turn, turn.status) == (users["plain"], "assistant", 1, "queued")


@pytest.mark.parametrize("body", [{"agent": "nobody", "content": "hi"}, {"agent": "assistant", "content": "  "}])
def test_a_new_chat_with_an_unknown_agent_or_no_message_is_refused_with_field_errors(browser_for, body):
    response = browser_for("plain").post("/chat/", body)
    assert response.status_code == 400
    assert 'class="field-error"' in response.content.decode()
    assert not Thread.objects.exists()


def test_the_new_chat_form_offers_every_agent(browser_for):
    html = browser_for("plain").get("/chat/").content.decode()
    offered = re.findall(r'<option value="([^"]+)"', html)
    assert {"assistant", "reimbursement", "coder"} <= set(offered)


@pytest.mark.parametrize(("role", "status"), [
    ("owner", 200), ("support", 200), ("reviewer", 200), ("superuser", 200), ("plain", 404), ("staff", 404)])
def test_a_thread_is_read_by_its_creator_support_and_reviewers_only(browser_for, chat, role, status):
    chat()
    response = browser_for(role).get("/chat/c1/")
    assert response.status_code == status
    if status == 404:
        assert "c1" not in response.content.decode() or "Not found" in response.content.decode()


def test_an_unknown_thread_is_not_found(browser_for):
    assert browser_for("owner").get("/chat/no-such-thread/").status_code == 404


def test_the_page_shows_the_turn_its_tool_call_and_result_and_the_creators_own_buttons(browser_for, chat):
    run = chat()
    html = browser_for("owner").get("/chat/c1/").content.decode()
    assert "Tell Ada the build is green" in html
    assert "Tool call: find_contact" in html and "Tool result: find_contact" in html
    assert "ada@example.test" in html
    assert f'action="{decide_path(run, pending(run))}"' in html
    assert 'value="approve"' in html and 'value="deny"' in html
    assert pending(run).token not in html  # the browser never holds a token


def test_the_message_box_is_disabled_while_the_turn_waits_and_open_once_it_ends(browser_for, chat, drain_runs):
    run = chat()
    owner = browser_for("owner")
    assert re.search(r'<textarea id="chat-message"[^>]*\bdisabled', owner.get("/chat/c1/").content.decode())
    owner.post(decide_path(run, pending(run)), {"verdict": "approve"})
    drain_runs()
    html = owner.get("/chat/c1/").content.decode()
    assert not re.search(r'<textarea id="chat-message"[^>]*\bdisabled', html)
    assert "Sent to Ada Lovelace" in html


def test_the_disabled_message_box_says_whose_answer_the_turn_waits_for(browser_for, chat):
    chat()
    chat(agent="reimbursement", text="Reimburse exp-1042", thread_id="c2")
    owner = browser_for("owner")
    assert "Approve or deny the request above first" in owner.get("/chat/c1/").content.decode()
    assert "A reviewer decides the request above first" in owner.get("/chat/c2/").content.decode()


def test_the_creator_approves_from_the_chat_and_the_turn_goes_on(browser_for, chat, users, drain_runs):
    run = chat()
    request = pending(run)
    response = browser_for("owner").post(decide_path(run, request), {"verdict": "approve"})
    assert response.status_code == 302 and response.url == "/chat/c1/"
    request.refresh_from_db()
    assert (request.status, request.decided_by) == ("approved", users["owner"])
    drain_runs()
    assert SandboxMessage.objects.get().body == "The build is green"


def test_the_creator_denies_with_a_reason_the_agent_reads(browser_for, chat, drain_runs):
    run = chat()
    browser_for("owner").post(decide_path(run, pending(run)), {"verdict": "deny", "reason": "Not yet"})
    drain_runs()
    run.refresh_from_db()
    assert run.status == "completed" and not SandboxMessage.objects.exists()
    html = browser_for("owner").get("/chat/c1/").content.decode()
    assert "Denied by olga" in html and "Not yet" in html


@pytest.mark.parametrize(("role", "status"), [("support", 403), ("plain", 404)])
def test_a_user_who_may_not_decide_gets_403_or_404_and_nothing_is_decided(browser_for, chat, role, status):
    run = chat()
    request = pending(run)
    assert browser_for(role).post(decide_path(run, request), {"verdict": "approve"}).status_code == status
    request.refresh_from_db()
    assert request.status == "pending"


def test_a_reviewers_agent_shows_its_creator_that_a_reviewer_decides_and_refuses_their_verdict(browser_for, chat):
    run = chat(agent="reimbursement", text="Reimburse exp-1042", thread_id="c2")
    owner = browser_for("owner")
    html = owner.get("/chat/c2/").content.decode()
    assert "Waiting for a reviewer" in html and 'value="approve"' not in html
    assert owner.post(decide_path(run, pending(run)), {"verdict": "approve"}).status_code == 403
    assert pending(run).status == "pending"


def test_a_reviewer_may_decide_a_request_from_the_chat(browser_for, chat, users):
    run = chat(agent="reimbursement", text="Reimburse exp-1042", thread_id="c2")
    request = pending(run)
    assert browser_for("reviewer").post(decide_path(run, request), {"verdict": "approve"}).status_code == 302
    request.refresh_from_db()
    assert (request.status, request.decided_by) == ("approved", users["reviewer"])


def test_a_request_of_another_thread_is_not_found_here(browser_for, chat, users):
    run = chat()
    thread_start(agent="assistant", user=users["owner"], thread_id="other")
    path = decide_path(run, pending(run)).replace("/chat/c1/", "/chat/other/")
    assert browser_for("owner").post(path, {"verdict": "approve"}).status_code == 404


def test_a_second_message_while_the_turn_waits_is_refused_with_409(browser_for, chat):
    chat()
    response = browser_for("owner").post("/chat/c1/", {"content": "And Grace too"})
    assert response.status_code == 409
    assert "still on its turn" in response.content.decode()
    assert Run.objects.filter(thread__thread_id="c1").count() == 1


def test_a_reader_who_is_not_the_creator_cannot_write(browser_for, chat, drain_runs):
    run = chat()
    browser_for("owner").post(decide_path(run, pending(run)), {"verdict": "approve"})
    drain_runs()
    support = browser_for("support")
    assert 'id="chat-message"' not in support.get("/chat/c1/").content.decode()
    assert support.post("/chat/c1/", {"content": "hello"}).status_code == 403
    assert browser_for("plain").post("/chat/c1/", {"content": "hello"}).status_code == 404
    assert Run.objects.filter(thread__thread_id="c1").count() == 1


def test_a_second_turn_is_added_and_answered_from_the_first(browser_for, chat, drain_runs):
    run = chat()
    owner = browser_for("owner")
    owner.post(decide_path(run, pending(run)), {"verdict": "approve"})
    drain_runs()
    response = owner.post("/chat/c1/", {"content": "What is Ada's email address?"})
    assert response.status_code == 302
    drain_runs()
    html = owner.get("/chat/c1/").content.decode()
    assert html.count('class="turn"') == 2
    assert "Ada Lovelace&#x27;s address is ada@example.test, as I looked it up earlier" in html


def test_a_sub_agents_calls_and_approval_are_shown_as_the_live_transcript_shows_them(browser_for, chat, drain_runs):
    run = chat(agent="coder", text="Make the math tests pass", thread_id="c3")
    reviewer = browser_for("reviewer")
    html = reviewer.get("/chat/c3/").content.decode()
    assert "Sub-agent coder</span>" in html  # its text, labelled as chat.js labels it
    assert "Tool call: run_shell (coder)</span>" in html
    assert "Approval requested: run_shell (coder)</span>" in html
    reviewer.post(decide_path(run, pending(run)), {"verdict": "approve"})
    drain_runs()
    html = reviewer.get("/chat/c3/").content.decode()
    labels = re.findall(r'<span class="entry-label">([^<]*)</span>', html)
    assert labels == ["olga", "coder", "Tool call: coder", "Sub-agent coder", "Tool call: run_shell (coder)",
                      "Approval requested: run_shell (coder)", "Verdict on run_shell", "Tool result: run_shell (coder)",
                      "Sub-agent coder", "Tool result: coder", "coder"]


def test_the_nav_links_to_the_chat_for_signed_in_users(browser_for, client):
    assert 'href="/chat/">Chat</a>' in browser_for("plain").get("/runs/").content.decode()
    assert 'href="/chat/">Chat</a>' not in client.get("/accounts/login/").content.decode()


@pytest.mark.usefixtures("enforced_csp")
@pytest.mark.parametrize("path", ["/chat/", "/chat/c1/"])
def test_the_chat_pages_pass_their_policy(browser_for, chat, path):
    chat()
    response = browser_for("owner").get(path)
    assert response.status_code == 200
    assert csp_problems(response) == []
