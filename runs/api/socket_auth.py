"""Who opens a WebSocket: the session cookie, or ``Authorization: Token KEY`` (or ``Bearer KEY``) on the handshake,
as on the REST API.

A browser sends its session cookie; an API client sends its API token. The token is checked by the API's own
authentication class (accounts.authentication), so the socket accepts exactly the tokens the API accepts. A
header that names a token scheme but does not verify (unknown, revoked, expired) leaves the user anonymous (the
consumer closes with 4401), as the API answers 401 rather than falling back to the session.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from channels.auth import AuthMiddleware
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.contrib.auth.models import AnonymousUser
from django.db import DataError
from rest_framework import exceptions

from accounts.authentication import ApiTokenAuthentication

__all__ = ["TokenAuthMiddleware", "TokenOrSessionAuthMiddlewareStack"]

_NO_TOKEN = object()


def _token_user(authorization: bytes) -> Any:
    """The user of an ``Authorization`` header by the API's rules; _NO_TOKEN when it is not a token scheme."""
    header = authorization.decode("latin-1")  # as Django decodes request headers
    request = SimpleNamespace(headers={"authorization": header}, META={"HTTP_AUTHORIZATION": header})
    try:
        verified = ApiTokenAuthentication().authenticate(request)
    except exceptions.AuthenticationFailed:
        return AnonymousUser()
    return _NO_TOKEN if verified is None else verified[0]


class TokenAuthMiddleware(AuthMiddleware):
    """Channels' AuthMiddleware, with an API token on the handshake taking precedence over the session."""

    async def resolve_scope(self, scope: dict) -> None:
        try:
            authorization = dict(scope.get("headers") or ()).get(b"authorization")
            if authorization is not None:
                user = await database_sync_to_async(_token_user)(authorization)
                if user is not _NO_TOKEN:
                    scope["user"]._wrapped = user
                    return
            await super().resolve_scope(scope)
        except DataError:  # a token or session key the database cannot even compare (a NUL on PostgreSQL)
            scope["user"]._wrapped = AnonymousUser()


def TokenOrSessionAuthMiddlewareStack(inner: Any) -> BaseMiddleware:  # noqa: N802 (Channels' own spelling)
    """Cookies, the session, then the user from a token or the session: AuthMiddlewareStack plus tokens."""
    return CookieMiddleware(SessionMiddleware(TokenAuthMiddleware(inner)))
