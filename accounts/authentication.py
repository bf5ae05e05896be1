"""The API's token authentication: ``Authorization: Token KEY`` or ``Authorization: Bearer KEY``.

Django REST framework authentication class (``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]``); the SSE view
(runs.api.events) and the WebSocket handshake (runs.api.socket_auth) use it too, so every door accepts the same
keys. A header in another scheme is left to the next class (the session); one in these schemes that does not
verify (unknown, revoked, expired, or its user inactive) is a 401 and never falls back to the session.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from accounts.models import ApiToken
from accounts.selectors import token_get_for_key
from accounts.services import token_touch

__all__ = ["ApiTokenAuthentication", "SCHEMES"]

#: The schemes a key may be sent in (compared without case, as HTTP schemes are); the first is the challenge.
SCHEMES = ("Token", "Bearer")


class ApiTokenAuthentication(BaseAuthentication):
    """A user's named API token, in either scheme; its last use is recorded to the minute."""

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        words = get_authorization_header(request).split()
        if not words or words[0].lower() not in {scheme.lower().encode() for scheme in SCHEMES}:
            return None
        # DRF's TokenAuthentication's words, so clients see the answers they already know.
        if len(words) == 1:
            raise exceptions.AuthenticationFailed("Invalid token header. No credentials provided.")
        if len(words) > 2:
            raise exceptions.AuthenticationFailed("Invalid token header. Token string should not contain spaces.")
        try:
            key = words[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed(
                "Invalid token header. Token string should not contain invalid characters.") from None
        return self.authenticate_credentials(key)

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        token = token_get_for_key(key=key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        if token.is_expired(timezone.now()):
            raise exceptions.AuthenticationFailed("Token has expired.")
        token_touch(token=token)
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return SCHEMES[0]
