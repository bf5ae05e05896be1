"""The token page's form: a new token's name and, optionally, its life in days."""

from __future__ import annotations

from django import forms

from accounts.services import MAX_EXPIRES_IN_DAYS

__all__ = ["TokenCreateForm"]


class TokenCreateForm(forms.Form):
    name = forms.CharField(label="Name", max_length=100, strip=True,
                           help_text="What the token is for: a script, a machine, a person.")
    expires_in_days = forms.IntegerField(
        label="Expires after (days)", required=False, min_value=1, max_value=MAX_EXPIRES_IN_DAYS,
        help_text="Leave empty for a token that never expires.",
    )
