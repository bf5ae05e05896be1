"""What the tokens API reads (a new token's name and life) and shows (a token, never its key; the key once, when
it is made)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from accounts.models import ApiToken
from accounts.services import MAX_EXPIRES_IN_DAYS
from runs.api.messages import ClosedSerializer, StrictCharField

__all__ = ["ApiTokenSerializer", "IssuedTokenSerializer", "TokenCreateInputSerializer"]


class StrictIntegerField(serializers.IntegerField):
    """Only JSON integers: DRF's IntegerField would take "30" and 30.0, which the document says are not one."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class TokenCreateInputSerializer(ClosedSerializer):
    """A new token: its name and, optionally, its life in days. Unknown keys are refused."""

    # Kept as sent (not stripped), so that every string the document allows is a valid name.
    name = StrictCharField(min_length=1, max_length=100, trim_whitespace=False,
                           help_text="What the token is for (a script, a machine, a person).")
    expires_in_days = StrictIntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=MAX_EXPIRES_IN_DAYS,
        help_text="Days until the token stops working; absent or null: it never expires.",
    )


class ApiTokenSerializer(serializers.ModelSerializer):
    """A token as lists show it: no key, only the start of it."""

    prefix = serializers.CharField(read_only=True, help_text="The start of the key, to tell tokens apart; not "
                                   "enough of it to authenticate.")

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "expires_at", "last_used_at"]
        read_only_fields = fields


class IssuedTokenSerializer(serializers.Serializer):
    """A token just made (an accounts.services.IssuedToken), with its key: shown in this answer only, never again."""

    id = serializers.IntegerField(source="token.id", read_only=True)
    name = serializers.CharField(source="token.name", read_only=True)
    prefix = serializers.CharField(source="token.prefix", read_only=True)
    created_at = serializers.DateTimeField(source="token.created_at", read_only=True)
    expires_at = serializers.DateTimeField(source="token.expires_at", read_only=True, allow_null=True)
    last_used_at = serializers.DateTimeField(source="token.last_used_at", read_only=True, allow_null=True)
    key = serializers.CharField(read_only=True, help_text=(
        "The key to send as `Authorization: Token KEY` or `Authorization: Bearer KEY`. Only this answer has it: "
        "the server keeps its SHA-256 alone."))
