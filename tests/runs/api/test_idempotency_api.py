"""``Idempotency-Key`` on ``POST /api/runs/``: a repeat starts nothing and gets the first answer (issue 22)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from runs.models import IdempotencyKey, Run
from runs.services import lifecycle
from tests.commands import runs_cli
from tests.factories import make_user

pytestmark = pytest.mark.django_db

BODY = {"agent": "reimbursement", "messages": [{"role": "user", "content": "Please reimburse exp-1042."}]}


def post(client, body=None, key: str | None = "key-1", path: str = "/api/runs/"):
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return client.post(path, BODY if body is None else body, format="json", **headers)


def test_a_repeat_with_the_same_key_and_body_replays_the_first_answer_and_starts_nothing(api_client):
    first = post(api_client)
    again = post(api_client)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.content == first.content  # the same run, minted id included, to the byte
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Run.objects.count() == 1


def test_the_replay_is_the_first_answer_even_after_the_run_moved_on(api_client):
    first = post(api_client).json()
    Run.objects.update(status=Run.Status.COMPLETED)
    assert post(api_client).json() == first


def test_without_a_key_every_post_starts_a_run(api_client):
    post(api_client, key=None)
    post(api_client, key=None)
    assert Run.objects.count() == 2


def test_the_same_key_with_another_body_answers_422_and_starts_nothing(api_client):
    post(api_client)
    response = post(api_client, {**BODY, "metadata": {"try": "2"}})
    assert response.status_code == 422
    assert "another request body" in response.json()["detail"]
    assert Run.objects.count() == 1


def test_a_repeat_while_the_first_is_being_answered_answers_409(api_client, monkeypatch):
    answers = []
    real_start = lifecycle.run_start

    def start_and_repeat(**options):
        answers.append(post(api_client))  # the client retries before the first answer came back
        return real_start(**options)

    monkeypatch.setattr("runs.api.views.run_start", start_and_repeat)
    first = post(api_client)
    assert (first.status_code, answers[0].status_code) == (201, 409)
    assert "still being answered" in answers[0].json()["detail"]
    assert Run.objects.count() == 1


def test_a_post_without_its_slash_shares_the_key_of_the_post_with_it(api_client):
    post(api_client)
    assert post(api_client, path="/api/runs")["Idempotent-Replayed"] == "true"
    assert Run.objects.count() == 1


def test_another_users_same_key_is_independent(api_client, token_client):
    bob = token_client(make_user("bob"))
    assert post(api_client).status_code == 201
    other = post(bob, {**BODY, "metadata": {"who": "bob"}})
    assert other.status_code == 201 and "Idempotent-Replayed" not in other
    assert Run.objects.count() == 2


def test_a_request_that_failed_is_not_kept_so_the_key_can_be_sent_again(api_client):
    assert post(api_client, {**BODY, "agent": "nope"}).status_code == 400
    assert post(api_client).status_code == 201
    assert post(api_client)["Idempotent-Replayed"] == "true"


def test_a_conflicting_run_id_is_not_kept_either(api_client):
    post(api_client, {**BODY, "run_id": "r1"}, key=None)
    assert post(api_client, {**BODY, "run_id": "r1"}).status_code == 409
    assert not IdempotencyKey.objects.exists()


@pytest.mark.parametrize("key", ["", "k" * 256, "two words"], ids=["empty", "256-chars", "space"])
def test_a_key_that_is_too_long_or_malformed_answers_400_naming_the_header(api_client, key):
    response = post(api_client, key=key)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()
    assert not Run.objects.exists()


def test_a_key_expires_after_24_hours(api_client):
    post(api_client)
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert "Idempotent-Replayed" not in post(api_client)
    assert Run.objects.count() == 2


def test_runs_prune_removes_expired_keys(api_client):
    post(api_client, key="old")
    post(api_client, key="new")
    IdempotencyKey.objects.filter(key="old").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert "Removed 1 expired idempotency key." in runs_cli("prune", "--older-than", "30")
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]


def test_the_schema_documents_the_header_and_the_409_and_422(client):
    start = client.get("/api/schema/").json()["paths"]["/api/runs/"]["post"]
    header = next(p for p in start["parameters"] if p["name"] == "Idempotency-Key")
    assert (header["in"], header.get("required", False), header["schema"]["maxLength"]) == ("header", False, 255)
    assert {"409", "422"} <= set(start["responses"])
    assert "Idempotent-Replayed" in start["responses"]["201"]["headers"]


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_identical_posts_start_one_run(token_client, monkeypatch):
    client_user = make_user("ada")
    clients = [token_client(client_user), token_client(client_user)]
    real_start, barrier = lifecycle.run_start, threading.Barrier(2)

    def slow_start(**options):
        time.sleep(0.3)  # the other request arrives while this one is being answered
        return real_start(**options)

    monkeypatch.setattr("runs.api.views.run_start", slow_start)
    statuses = []

    def send(client) -> None:
        try:
            barrier.wait()
            statuses.append(post(client).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) in ([201, 201], [201, 409])  # a replay, or the repeat told to wait
    assert Run.objects.count() == 1
