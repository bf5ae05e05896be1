"""Writes of API tokens: create one (its key is returned once, and only its digest kept), revoke one, and record
its use."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.errors import TokenNotFound
from accounts.keys import key_digest, key_generate, key_prefix
from accounts.models import MAX_TOKEN_ID, ApiToken

__all__ = ["IssuedToken", "LAST_USED_PRECISION", "MAX_EXPIRES_IN_DAYS", "token_create", "token_revoke", "token_touch"]

#: The longest life a token may be given (ten years); without one it never expires.
MAX_EXPIRES_IN_DAYS = 3650
#: last_used_at is written at most this often per token, so a busy client does not write on every request.
LAST_USED_PRECISION = datetime.timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedToken:
    """A token just made and its key: the one moment the key exists outside the client."""

    token: ApiToken
    key: str


@transaction.atomic
def token_create(*, user: Any, name: str, expires_in_days: int | None = None) -> IssuedToken:
    """A new token of ``user`` named ``name``, expiring after ``expires_in_days`` (None: never)."""
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_EXPIRES_IN_DAYS:
        raise ValidationError(
            {"expires_in_days": f"Between 1 and {MAX_EXPIRES_IN_DAYS} days, or none to never expire."})
    key = key_generate()
    now = timezone.now()
    token = ApiToken(
        user=user, name=name, prefix=key_prefix(key), digest=key_digest(key), created_at=now,
        expires_at=None if expires_in_days is None else now + datetime.timedelta(days=expires_in_days),
    )
    token.full_clean()
    token.save()
    return IssuedToken(token=token, key=key)


@transaction.atomic
def token_revoke(*, user: Any, token_id: int) -> ApiToken:
    """Revoke ``user``'s token ``token_id`` for good; another user's, an unknown or a revoked one is TokenNotFound."""
    token = None
    if 1 <= token_id <= MAX_TOKEN_ID:
        token = ApiToken.objects.select_for_update().filter(pk=token_id, user=user, revoked_at=None).first()
    if token is None:
        raise TokenNotFound()
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    return token


def token_touch(*, token: ApiToken) -> None:
    """Record that ``token`` was just used, unless that was recorded less than LAST_USED_PRECISION ago."""
    now = timezone.now()
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_PRECISION:
        return
    # One conditional UPDATE, no transaction: concurrent requests of one client write it once.
    ApiToken.objects.filter(Q(last_used_at=None) | Q(last_used_at__lt=now - LAST_USED_PRECISION), pk=token.pk).update(
        last_used_at=now)
    token.last_used_at = now
