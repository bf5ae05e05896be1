"""runs.services.idempotency: one answer per user and Idempotency-Key, replayed for 24 hours (issue 22)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.errors import IdempotencyKeyInFlight, IdempotencyKeyInvalid, IdempotencyKeyReused
from runs.models import IdempotencyKey
from runs.services.idempotency import (
    IDEMPOTENCY_TTL,
    IN_FLIGHT_TIMEOUT,
    MAX_KEY_CHARS,
    IdempotentAnswer,
    idempotency_keys_prune,
    idempotent_answer,
    request_fingerprint,
)
from tests.factories import make_user

pytestmark = pytest.mark.django_db

SCOPE = "POST /api/runs/"


@pytest.fixture
def ada():
    return make_user("ada")


class Counter:
    """An answer that counts how often it was computed, and answers the count."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> IdempotentAnswer:
        self.calls += 1
        return IdempotentAnswer(status=201, body={"call": self.calls, "z": 1, "a": 2})


def answered(user, key="k1", body=None, answer=None, scope=SCOPE) -> IdempotentAnswer:
    return idempotent_answer(user=user, key=key, scope=scope, body={"x": 1} if body is None else body,
                             answer=answer or Counter())


def test_a_repeat_replays_the_first_answer_without_computing_it_again(ada):
    counter = Counter()
    first = answered(ada, answer=counter)
    again = answered(ada, answer=counter)
    assert counter.calls == 1
    assert (again.status, again.body, again.is_replay) == (201, {"call": 1, "z": 1, "a": 2}, True)
    assert first.is_replay is False
    assert list(again.body) == ["call", "z", "a"]  # the first answer to the byte: its keys in their order


def test_the_same_body_in_another_key_order_is_the_same_request(ada):
    counter = Counter()
    answered(ada, body={"a": 1, "b": {"c": 2, "d": 3}}, answer=counter)
    answered(ada, body={"b": {"d": 3, "c": 2}, "a": 1}, answer=counter)
    assert counter.calls == 1


def test_the_same_key_with_another_body_is_refused(ada):
    answered(ada, body={"x": 1})
    with pytest.raises(IdempotencyKeyReused):
        answered(ada, body={"x": 2})


def test_the_same_key_sent_to_another_endpoint_is_refused(ada):
    answered(ada)
    with pytest.raises(IdempotencyKeyReused):
        answered(ada, scope="POST /api/threads/t1/messages/")


def test_a_repeat_while_the_first_is_being_answered_is_refused(ada):
    def first() -> IdempotentAnswer:
        with pytest.raises(IdempotencyKeyInFlight):
            answered(ada)
        return IdempotentAnswer(status=201, body={})

    answered(ada, answer=first)


def test_another_users_same_key_is_independent(ada):
    counter = Counter()
    answered(ada, body={"x": 1}, answer=counter)
    other = answered(make_user("bob"), body={"x": 2}, answer=counter)
    assert (counter.calls, other.is_replay) == (2, False)


def test_an_answer_that_raises_is_not_kept_and_the_key_may_be_sent_again(ada):
    def failing() -> IdempotentAnswer:
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        answered(ada, answer=failing)
    assert not IdempotencyKey.objects.exists()
    assert answered(ada).status == 201


def test_what_a_raising_answer_wrote_is_rolled_back_with_it(ada):
    def failing() -> IdempotentAnswer:
        make_user("written-then-failed")
        raise ValueError("after a write")

    with pytest.raises(ValueError):
        answered(ada, answer=failing)
    assert not type(ada).objects.filter(username="written-then-failed").exists()


def test_a_key_expires_after_24_hours_and_is_then_a_new_request(ada):
    counter = Counter()
    answered(ada, body={"x": 1}, answer=counter)
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    fresh = answered(ada, body={"x": 2}, answer=counter)
    assert (counter.calls, fresh.is_replay) == (2, False)
    assert IdempotencyKey.objects.get().expires_at > timezone.now() + IDEMPOTENCY_TTL - timedelta(minutes=1)


def test_a_key_left_in_flight_by_a_request_that_died_is_taken_over(ada):
    IdempotencyKey.objects.create(
        user=ada, key="k1", scope=SCOPE, fingerprint=request_fingerprint(scope=SCOPE, body={"x": 1}),
        created_at=timezone.now() - IN_FLIGHT_TIMEOUT - timedelta(seconds=1),
        expires_at=timezone.now() + timedelta(hours=23),
    )
    assert answered(ada).is_replay is False


def test_a_key_in_flight_for_less_than_the_timeout_is_not_taken_over(ada):
    IdempotencyKey.objects.create(
        user=ada, key="k1", scope=SCOPE, fingerprint=request_fingerprint(scope=SCOPE, body={"x": 1}),
        created_at=timezone.now() - IN_FLIGHT_TIMEOUT + timedelta(seconds=30),
        expires_at=timezone.now() + timedelta(hours=23),
    )
    with pytest.raises(IdempotencyKeyInFlight):
        answered(ada)


@pytest.mark.parametrize("key", ["", " ", "a b", "é", "k" * (MAX_KEY_CHARS + 1), "a\tb", None], ids=repr)
def test_a_key_that_is_not_1_to_255_visible_ascii_characters_is_refused(ada, key):
    counter = Counter()
    with pytest.raises(IdempotencyKeyInvalid):
        answered(ada, key=key, answer=counter)
    assert counter.calls == 0


def test_a_key_of_255_characters_is_kept(ada):
    assert answered(ada, key="k" * MAX_KEY_CHARS).status == 201


def test_prune_removes_the_expired_keys_only(ada):
    answered(ada, key="old")
    answered(ada, key="new")
    IdempotencyKey.objects.filter(key="old").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert idempotency_keys_prune(dry_run=True) == 1
    assert IdempotencyKey.objects.count() == 2
    assert idempotency_keys_prune() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]
