"""The console's queue filters, read from GET and validated: an unknown agent or age is said (400), never ignored."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings

__all__ = ["AGES", "EXPIRING_SOON", "QueueFilterForm"]

#: "Waiting at least": the choices of the age filter.
AGES = {"15m": timedelta(minutes=15), "1h": timedelta(hours=1), "4h": timedelta(hours=4), "1d": timedelta(days=1)}
_AGE_LABELS = {"15m": "15 minutes or more", "1h": "An hour or more", "4h": "4 hours or more", "1d": "A day or more"}
#: A request that expires within this long is "expiring soon".
EXPIRING_SOON = timedelta(hours=1)


class QueueFilterForm(forms.Form):
    """GET parameters of /console/: ``agent``, ``tool`` (its exact name), ``age`` (waiting at least), ``expiring``
    (within the hour, soonest first)."""

    agent = forms.ChoiceField(label="Agent", required=False)
    tool = forms.CharField(label="Tool", required=False, max_length=200, strip=True,
                           widget=forms.TextInput(attrs={"list": "queue-tools", "autocomplete": "off"}))
    age = forms.ChoiceField(label="Waiting", required=False,
                            choices=[("", "Any time"), *((key, label) for key, label in _AGE_LABELS.items())])
    expiring = forms.BooleanField(label="Expiring within the hour", required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = [("", "Any"), *((name, name) for name in sorted(settings.DEUZ_AGENTS))]
        self.fields["agent"].error_messages["invalid_choice"] = "Unknown agent %(value)s."
        self.fields["age"].error_messages["invalid_choice"] = (
            "Unknown age %(value)s: choose one of " + ", ".join(AGES) + ".")

    def selection(self) -> dict[str, Any]:
        """The valid filters as approval_queue_list's keyword arguments (call after ``is_valid``)."""
        data = self.cleaned_data
        return {
            "agent": data.get("agent") or None,
            "tool": data.get("tool") or None,
            "waiting_at_least": AGES.get(data.get("age") or ""),
            "expiring_within": EXPIRING_SOON if data.get("expiring") else None,
        }

    @property
    def is_filtered(self) -> bool:
        return any(self.cleaned_data.values())

    def query_string(self, **changes: Any) -> str:
        """The filters as a query string (for pagination links), with ``changes`` applied."""
        values = {name: self.data.get(name, "") for name in self.fields}
        values.update(changes)
        return urlencode({name: value for name, value in values.items() if value not in ("", None)})
