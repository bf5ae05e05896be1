"""Idempotency keys: a POST repeated with the same ``Idempotency-Key`` is answered once (issue 22).

The same key and body from the same user within IDEMPOTENCY_TTL replays the first answer (status and body); the same
key with another body, or sent to another endpoint, is IdempotencyKeyReused; a repeat while the first request is
still being answered is IdempotencyKeyInFlight. Keys are per user: another user's same key is independent.

A first request commits its key (in flight) before it is answered, so a concurrent repeat finds it; the unique
constraint on (user, key) settles two first requests that race, on SQLite and PostgreSQL alike. The answer is
computed and stored in one transaction, so a key whose request died mid-way has stored nothing else either: it is
taken over after IN_FLIGHT_TIMEOUT. An answer that raises is not kept, and the key is released: the same request
may be sent again. Expired keys are removed by ``manage.py runs prune`` (idempotency_keys_prune), and a key that
has expired is taken over by the next request that sends it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from rest_framework.utils.encoders import JSONEncoder

from runs.errors import IdempotencyKeyInFlight, IdempotencyKeyInvalid, IdempotencyKeyReused
from runs.models import IdempotencyKey

__all__ = [
    "IDEMPOTENCY_TTL",
    "IN_FLIGHT_TIMEOUT",
    "IdempotentAnswer",
    "MAX_KEY_CHARS",
    "idempotency_keys_prune",
    "idempotent_answer",
    "request_fingerprint",
]

logger = logging.getLogger("deuz.idempotency")

#: How long a key's answer is replayed.
IDEMPOTENCY_TTL = timedelta(hours=24)
#: A key still in flight after this long belongs to a request that died: its answer's transaction never committed.
IN_FLIGHT_TIMEOUT = timedelta(minutes=5)
MAX_KEY_CHARS = 255
#: Visible ASCII, as in an HTTP header, 1-MAX_KEY_CHARS characters (a UUID is 36).
_KEY = re.compile(rf"[\x21-\x7e]{{1,{MAX_KEY_CHARS}}}")


@dataclass(frozen=True)
class IdempotentAnswer:
    """What a request is answered: a status and a JSON body; ``is_replay`` when it is a stored first answer."""

    status: int
    body: Any
    is_replay: bool = False


def request_fingerprint(*, scope: str, body: Any) -> str:
    """SHA-256 of the endpoint and the canonical JSON of the body (keys sorted, compact), so key order and spacing
    do not make two bodies differ."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, cls=JSONEncoder)
    return hashlib.sha256(f"{scope}\n{canonical}".encode()).hexdigest()


def idempotent_answer(
    *, user: AbstractBaseUser, key: str, scope: str, body: Any, answer: Callable[[], IdempotentAnswer]
) -> IdempotentAnswer:
    """``answer()`` the first time ``user`` sends ``key`` to ``scope`` with ``body``; its stored copy to a repeat.

    ``answer`` must write what it writes in the database only (it runs in one transaction with the stored answer).
    Raises IdempotencyKeyInvalid, IdempotencyKeyReused or IdempotencyKeyInFlight, and whatever ``answer`` raises.
    """
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise IdempotencyKeyInvalid(
            f"The Idempotency-Key header must be 1-{MAX_KEY_CHARS} visible ASCII characters (a UUID, say)."
        )
    fingerprint = request_fingerprint(scope=scope, body=body)
    claimed = _claim(user=user, key=key, scope=scope, fingerprint=fingerprint)
    if isinstance(claimed, IdempotentAnswer):
        return claimed
    try:
        with transaction.atomic():
            given = answer()
            stored = json.dumps(given.body, cls=JSONEncoder, ensure_ascii=False)
            IdempotencyKey.objects.filter(pk=claimed.pk).update(status_code=given.status, answer=stored)
    except BaseException:
        _release(claimed)
        raise
    return given


def _claim(*, user: AbstractBaseUser, key: str, scope: str, fingerprint: str) -> IdempotencyKey | IdempotentAnswer:
    """The key, newly in flight for this request; or the stored answer to replay."""
    for _attempt in range(3):
        now = timezone.now()
        try:
            with transaction.atomic():
                return IdempotencyKey.objects.create(
                    user=user, key=key, scope=scope, fingerprint=fingerprint, created_at=now,
                    expires_at=now + IDEMPOTENCY_TTL,
                )
        except IntegrityError:
            pass  # sent before: answered, in flight, or expired
        existing = IdempotencyKey.objects.filter(user=user, key=key).first()
        if existing is None:
            continue  # its first request failed and released it meanwhile
        abandoned_before = now - IN_FLIGHT_TIMEOUT
        if existing.expires_at <= now or existing.status_code is None and existing.created_at <= abandoned_before:
            # Expired, or left in flight by a request that died: compare-and-delete, so that of two takers one wins.
            IdempotencyKey.objects.filter(pk=existing.pk).filter(
                Q(expires_at__lte=now) | Q(status_code__isnull=True, created_at__lte=abandoned_before)
            ).delete()
            continue
        if existing.fingerprint != fingerprint:
            raise IdempotencyKeyReused(
                "This Idempotency-Key was sent with another request body (or to another endpoint); a new request "
                "needs a new key."
            )
        if existing.status_code is None:
            raise IdempotencyKeyInFlight(
                "The first request with this Idempotency-Key is still being answered; repeat it later for its answer."
            )
        return IdempotentAnswer(status=existing.status_code, body=json.loads(existing.answer), is_replay=True)
    raise IdempotencyKeyInFlight("This Idempotency-Key is being taken by another request; repeat it later.")


def _release(claimed: IdempotencyKey) -> None:
    """Forget a key whose request raised, so that it may be sent again; an answer stored meanwhile is kept."""
    try:
        IdempotencyKey.objects.filter(pk=claimed.pk, status_code__isnull=True).delete()
    except DatabaseError:
        # The request's own error is the one to report; the key is taken over after IN_FLIGHT_TIMEOUT.
        logger.warning("Could not release idempotency key %s", claimed.pk, exc_info=True)


def idempotency_keys_prune(*, dry_run: bool = False) -> int:
    """Remove the keys past their expiry (with ``dry_run``, count them); answers how many."""
    expired = IdempotencyKey.objects.filter(expires_at__lte=timezone.now())
    return expired.count() if dry_run else expired.delete()[0]
