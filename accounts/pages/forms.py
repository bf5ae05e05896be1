"""The account pages' forms: a new token's name and, optionally, its life in days; the user's choice of emails."""

from __future__ import annotations

from django import forms

from accounts.services import MAX_EXPIRES_IN_DAYS

__all__ = ["EmailPreferenceForm", "TokenCreateForm"]


class TokenCreateForm(forms.Form):
    name = forms.CharField(label="Name", max_length=100, strip=True,
                           help_text="What the token is for: a script, a machine, a person.")
    expires_in_days = forms.IntegerField(
        label="Expires after (days)", required=False, min_value=1, max_value=MAX_EXPIRES_IN_DAYS,
        help_text="Leave empty for a token that never expires.",
    )


class EmailPreferenceForm(forms.Form):
    review_requests = forms.BooleanField(
        label="Email me each approval request I may decide", required=False,
        help_text="One email per request, with a link to its page (or one per few minutes for all of them, when the "
                  "server collects them into a digest). Never the request's input or token.",
    )
