"""Threads (runs.services.threads): each turn a run that starts from the previous turn's final history plus one new
user message; one turn at a time; a provider never sent an unanswered tool call."""

from __future__ import annotations

import threading

import pytest
from django.db import close_old_connections, connection

from runs.errors import RunNotResumable, ThreadAlreadyExists, ThreadTurnActive
from runs.models import Run
from runs.selectors import run_input_messages
from runs.services.lifecycle import run_cancel, run_requeue
from runs.services.threads import thread_message_add, thread_start
from tests.runs.services import thread_agents
from tests.runs.services.thread_agents import sent_requests

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def probe(settings):
    settings.DEUZ_AGENTS = {**settings.DEUZ_AGENTS, "probe": "tests.runs.services.thread_agents.probe_agent"}
    thread_agents.MODELS.clear()


def tool_parts(messages, kind: str) -> list[dict]:
    return [part for message in messages if isinstance(message["content"], list)
            for part in message["content"] if part.get("type") == kind]


def test_a_second_turn_is_sent_the_first_turns_tool_call_and_result(owner, drain_runs):
    thread_start(agent="probe", user=owner, thread_id="t1")
    thread_message_add(thread_id="t1", content="first question", user=owner)
    drain_runs()
    thread_agents.MODELS.clear()
    thread_message_add(thread_id="t1", content="second question", user=owner)
    drain_runs()
    first_request = sent_requests()[0]["messages"]
    (call, *_) = tool_parts(first_request, "tool_call")
    results = tool_parts(first_request, "tool_result")
    assert call["input"] == {"q": "first question"}
    assert results[0]["tool_call_id"] == call["tool_call_id"]
    assert results[0]["output"] == {"found": "facts about first question"}
    assert first_request[-1] == {"role": "user", "content": "second question"}


def test_turns_are_numbered_from_one_in_their_thread(owner, drain_runs):
    thread = thread_start(agent="probe", user=owner, thread_id="t1")
    first = thread_message_add(thread_id="t1", content="one", user=owner)
    drain_runs()
    second = thread_message_add(thread_id="t1", content="two", user=owner)
    assert (first.thread, first.turn, second.thread, second.turn) == (thread, 1, thread, 2)


@pytest.mark.parametrize("status", ["queued", "suspended"])
def test_a_thread_takes_no_message_while_its_turn_is_not_over(owner, drain_runs, status):
    thread_start(agent="probe", user=owner, thread_id="t1")
    first = thread_message_add(thread_id="t1", content="gated step", user=owner)
    if status == "suspended":
        drain_runs()
    with pytest.raises(ThreadTurnActive) as refused:
        thread_message_add(thread_id="t1", content="again", user=owner)
    assert (refused.value.active_run_id, refused.value.status) == (first.run_id, status)
    assert Run.objects.filter(thread__thread_id="t1").count() == 1


def test_a_turn_after_a_cancelled_turn_sends_no_unanswered_tool_call(owner, drain_runs):
    thread_start(agent="probe", user=owner, thread_id="t1")
    first = thread_message_add(thread_id="t1", content="gated step", user=owner)
    drain_runs()  # suspended on the gated call: the assistant's call has no result
    run_cancel(run_id=first.run_id, user=owner)
    thread_agents.MODELS.clear()
    thread_message_add(thread_id="t1", content="what now?", user=owner)
    drain_runs()
    sent = sent_requests()[0]["messages"]
    calls = {part["tool_call_id"] for part in tool_parts(sent, "tool_call")}
    answered = {part["tool_call_id"]: part for part in tool_parts(sent, "tool_result")}
    assert calls and calls == set(answered)
    assert all(answered[call]["is_error"] for call in calls)


def test_a_turn_after_one_cancelled_before_any_step_keeps_its_user_message(owner):
    thread_start(agent="probe", user=owner, thread_id="t1")
    first = thread_message_add(thread_id="t1", content="never answered", user=owner)
    run_cancel(run_id=first.run_id, user=owner)
    second = thread_message_add(thread_id="t1", content="hello?", user=owner)
    assert run_input_messages(second) == [{"role": "user", "content": "never answered"},
                                          {"role": "user", "content": "hello?"}]


def test_a_thread_id_is_taken_once(owner):
    thread_start(agent="probe", user=owner, thread_id="t1")
    with pytest.raises(ThreadAlreadyExists):
        thread_start(agent="probe", user=owner, thread_id="t1")


def test_a_turn_that_has_a_later_turn_cannot_be_resumed(owner, drain_runs, monkeypatch):
    thread_start(agent="probe", user=owner, thread_id="t1")
    first = thread_message_add(thread_id="t1", content="one", user=owner)
    Run.objects.filter(pk=first.pk).update(status=Run.Status.FAILED)
    thread_message_add(thread_id="t1", content="two", user=owner)
    with pytest.raises(RunNotResumable):
        run_requeue(run_id=first.run_id)


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_messages_make_one_turn(owner):
    thread_start(agent="probe", user=owner, thread_id="t1")
    barrier, outcomes = threading.Barrier(2), []

    def post(text: str) -> None:
        try:
            barrier.wait(timeout=10)
            thread_message_add(thread_id="t1", content=text, user=owner)
            outcomes.append("turn")
        except ThreadTurnActive:
            outcomes.append("refused")
        finally:
            close_old_connections()
            connection.close()

    posts = [threading.Thread(target=post, args=(text,)) for text in ("a", "b")]
    for each in posts:
        each.start()
    for each in posts:
        each.join(timeout=30)
    assert sorted(outcomes) == ["refused", "turn"]
    assert list(Run.objects.filter(thread__thread_id="t1").values_list("turn", flat=True)) == [1]
