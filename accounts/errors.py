"""Errors of the accounts services.

AccountsError
  TokenNotFound             (404: no such token, another user's, or revoked already)
"""

from __future__ import annotations

__all__ = ["AccountsError", "TokenNotFound"]


class AccountsError(Exception):
    """Base for errors a caller of the accounts services can act on."""


class TokenNotFound(AccountsError):
    # The id is not echoed: in a URL it is client input of any shape.
    def __init__(self) -> None:
        super().__init__("You have no such API token.")
