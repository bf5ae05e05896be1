"""The threads API (SERVICE.md, "Conversations"): start, list, read, send a message; roles as for runs; a run's
thread and turn in its JSON."""

from __future__ import annotations

import pytest

from approvals.roles import SUPPORT_GROUP
from runs.models import Run
from tests.factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner_client(token_client, owner):
    return token_client(owner)


@pytest.fixture
def thread(owner_client):
    """Olga's reimbursement thread t1, no turn yet."""
    response = owner_client.post("/api/threads/", {"agent": "reimbursement", "thread_id": "t1",
                                                  "metadata": {"ticket": "T-9"}}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def send(client, text, thread_id="t1", **headers):
    return client.post(f"/api/threads/{thread_id}/messages/", {"content": text}, format="json", headers=headers)


def test_a_new_thread_answers_its_shape(thread):
    assert set(thread) == {"thread_id", "agent", "created_by", "created_at", "updated_at", "metadata", "turns",
                           "messages"}
    assert (thread["thread_id"], thread["agent"], thread["created_by"], thread["metadata"], thread["turns"],
            thread["messages"]) == ("t1", "reimbursement", "olga", {"ticket": "T-9"}, [], [])


def test_a_thread_id_that_exists_is_a_409(owner_client, thread):
    response = owner_client.post("/api/threads/", {"agent": "reimbursement", "thread_id": "t1"}, format="json")
    assert response.status_code == 409
    assert "thread_id" in response.json()


@pytest.mark.parametrize("body, field", [({"agent": "nobody"}, "agent"), ({"agent": "reimbursement", "thread_id": "a b"},
                                          "thread_id"), ({"agent": "reimbursement", "metadata": []}, "metadata")])
def test_a_bad_thread_is_a_400_naming_the_field(owner_client, body, field):
    response = owner_client.post("/api/threads/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()


def test_a_message_answers_the_new_turns_run(owner_client, thread):
    response = send(owner_client, "Reimburse exp-1042")
    assert response.status_code == 201, response.content
    run = response.json()
    assert (run["thread_id"], run["turn"], run["status"]) == ("t1", 1, "queued")
    assert run["input_messages"] == [{"role": "user", "content": "Reimburse exp-1042"}]


def test_a_run_outside_a_thread_has_a_null_thread_and_turn(owner_client):
    response = owner_client.post("/api/runs/", {"agent": "reimbursement", "messages": [
        {"role": "user", "content": "Reimburse exp-1042"}]}, format="json")
    assert (response.json()["thread_id"], response.json()["turn"]) == (None, None)


def test_a_message_while_a_turn_is_active_is_a_409_naming_it(owner_client, thread):
    first = send(owner_client, "Reimburse exp-1042").json()
    response = send(owner_client, "And then?")
    assert response.status_code == 409
    assert response.json()["active_run_id"] == first["run_id"]


def test_the_thread_shows_its_turns_and_the_history_so_far(owner_client, thread, drain_runs):
    first = send(owner_client, "Reimburse exp-1042").json()
    drain_runs()  # suspended on the payment's approval, after the lookup
    shown = owner_client.get("/api/threads/t1/").json()
    assert [(turn["run_id"], turn["status"]) for turn in shown["turns"]] == [(first["run_id"], "suspended")]
    assert [message["role"] for message in shown["messages"]] == ["user", "assistant", "tool", "assistant"]


def test_the_list_shows_the_latest_activity_first(owner_client, thread, drain_runs):
    owner_client.post("/api/threads/", {"agent": "reimbursement", "thread_id": "t2"}, format="json")
    send(owner_client, "Reimburse exp-1042", thread_id="t1")
    listed = owner_client.get("/api/threads/").json()
    assert [row["thread_id"] for row in listed["results"]] == ["t1", "t2"]
    assert listed["count"] == 2


def test_support_reads_every_thread_but_adds_no_message(token_client, thread):
    support = token_client(make_user("sue", SUPPORT_GROUP))
    assert support.get("/api/threads/t1/").status_code == 200
    assert [row["thread_id"] for row in support.get("/api/threads/").json()["results"]] == ["t1"]
    assert send(support, "hello").status_code == 403


def test_another_user_is_told_the_thread_does_not_exist(token_client, thread):
    pat = token_client(make_user("pat"))
    assert pat.get("/api/threads/t1/").status_code == 404
    assert pat.get("/api/threads/").json()["results"] == []


def test_another_user_cannot_post_a_message(token_client, thread):
    pat = token_client(make_user("pat"))
    assert send(pat, "Reimburse exp-1042").status_code == 404
    assert not Run.objects.filter(thread__thread_id="t1").exists()


def test_an_idempotency_key_replays_the_first_turn(owner_client, thread):
    first = send(owner_client, "Reimburse exp-1042", **{"Idempotency-Key": "k1"})
    again = send(owner_client, "Reimburse exp-1042", **{"Idempotency-Key": "k1"})
    assert (again.status_code, again.json()["run_id"]) == (201, first.json()["run_id"])
    assert again.headers["Idempotent-Replayed"] == "true"
    assert Run.objects.filter(thread__thread_id="t1").count() == 1


def test_the_same_key_on_another_thread_is_not_a_replay(owner_client, thread):
    owner_client.post("/api/threads/", {"agent": "reimbursement", "thread_id": "t2"}, format="json")
    send(owner_client, "Reimburse exp-1042", **{"Idempotency-Key": "k1"})
    response = send(owner_client, "Reimburse exp-1042", thread_id="t2", **{"Idempotency-Key": "k1"})
    assert response.status_code == 422


def test_a_message_carries_no_history_of_the_clients(owner_client, thread):
    response = owner_client.post("/api/threads/t1/messages/", {"content": "hi", "messages": []}, format="json")
    assert response.status_code == 400
