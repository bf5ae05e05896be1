"""Errors of the accounts services.

AccountsError
  TokenNotFound             (404: no such token, another user's, or revoked already)
"""

from __future__ import annotations

__all__ = ["AccountsError", "TokenNotFound"]


class AccountsError(Exception):
    """Base for errors a caller of the accounts services can act on."""


class TokenNotFound(AccountsError):
    def __init__(self, token_id: object) -> None:
        super().__init__(f"You have no API token {token_id!r}.")
