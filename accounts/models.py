"""The accounts' records: named API tokens, many per user, each stored as the digest of its key."""

from __future__ import annotations

import datetime

from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator
from django.db import models
from django.utils import timezone

__all__ = ["MAX_TOKEN_ID", "ApiToken"]

#: The largest id a token can have (a 64-bit key): a larger one names no token, and is never sent to the database.
MAX_TOKEN_ID = 2**63 - 1


class ApiToken(models.Model):
    """One API key of a user: its name, the digest of the key (never the key), when it expires and was last used.

    A revoked token keeps its row (who had which token, and when it was last used, stays readable in the admin);
    it authenticates nothing and no list shows it.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, validators=[ProhibitNullCharactersValidator()],
                            help_text="What the token is for, chosen by its owner.")
    prefix = models.CharField(max_length=16, help_text="The start of the key, to tell tokens apart.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the key, in hex.")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: never expires.")
    last_used_at = models.DateTimeField(null=True, blank=True, help_text="To the minute.")
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = "API token"
        indexes = [models.Index(fields=["user", "revoked_at"], name="accounts_token_user_active")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def is_expired(self, now: datetime.datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())
