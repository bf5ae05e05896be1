"""The chat page's live topic, `ws/live/?topic=thread:<id>`: only readers of the thread may follow it, and a new turn
(or a turn's change of status) is a frame naming the thread and the turn's run, nothing more."""

from __future__ import annotations

import pytest

from runs.services.threads import thread_message_add, thread_start
from tests.runs.api.test_pages_socket import frames_after, refusal

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def thread(users):
    return thread_start(agent="assistant", user=users["owner"], thread_id="t1")


def test_a_thread_the_user_may_not_read_is_refused_as_not_found(users, thread):
    assert refusal(users["plain"], "topic=thread:t1") == ("websocket.close", 4404)
    assert refusal(users["owner"], "topic=thread:no-such-thread") == ("websocket.close", 4404)


@pytest.mark.parametrize("role", ["owner", "support"])
def test_a_new_turn_is_told_to_the_threads_readers(users, thread, role):
    def add_turn():
        thread_message_add(thread_id="t1", content="Tell Ada hi", user=users["owner"], run_id="turn-1")

    [frame] = frames_after(users[role], "topic=thread:t1", add_turn)
    assert frame == {"topic": "thread:t1", "event": "status", "run_id": "turn-1", "status": "queued"}
