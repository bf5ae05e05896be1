"""Reads of API tokens: a user's own list, and the token a presented key belongs to."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from accounts.keys import MAX_KEY_CHARS, key_digest
from accounts.models import MAX_TOKEN_ID, ApiToken

__all__ = ["token_get", "token_get_for_key", "token_list"]


def token_list(*, user: Any) -> QuerySet[ApiToken]:
    """``user``'s tokens that are not revoked (expired ones too, until revoked), newest first."""
    return ApiToken.objects.filter(user=user, revoked_at=None)


def token_get(*, user: Any, token_id: int) -> ApiToken | None:
    """``user``'s unrevoked token ``token_id``; None for another user's, an unknown or a revoked one."""
    if not 1 <= token_id <= MAX_TOKEN_ID:
        return None
    return token_list(user=user).filter(pk=token_id).first()


def token_get_for_key(*, key: str) -> ApiToken | None:
    """The unrevoked token whose key is ``key``, with its user; None for any other key. Expiry is the caller's."""
    if not key or len(key) > MAX_KEY_CHARS:
        return None
    # Looked up by digest: the database only ever sees hex, so no key reaches a query or its log.
    return ApiToken.objects.select_related("user").filter(digest=key_digest(key), revoked_at=None).first()
