"""The run list's search and filters, validated: an unknown status or a bad date is said, never ignored; and the
run page's cancel form."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from runs.models import Run

__all__ = ["RunCancelForm", "RunFilterForm"]


class RunCancelForm(forms.Form):
    """The run page's cancel: an optional reason, kept with who cancelled."""

    reason = forms.CharField(label="Reason (optional)", required=False, strip=True,
                             max_length=Run._meta.get_field("cancel_reason").max_length)


class RunFilterForm(forms.Form):
    """GET parameters of /runs/: ``q`` (part of a run id), ``status``, ``agent``, ``creator``, ``since``/``until``."""

    q = forms.CharField(label="Run id", required=False, max_length=200, strip=True)
    status = forms.ChoiceField(label="Status", required=False)
    agent = forms.ChoiceField(label="Agent", required=False)
    creator = forms.CharField(label="Started by", required=False, max_length=150, strip=True,
                              help_text="A username")
    since = forms.DateField(label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(label="To", required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["status"].choices = [("", "Any"), *Run.Status.choices]
        self.fields["status"].error_messages["invalid_choice"] = (
            "Unknown status %(value)s: choose one of " + ", ".join(Run.Status.values) + "."
        )
        agents = sorted(settings.DEUZ_AGENTS)
        self.fields["agent"].choices = [("", "Any"), *((name, name) for name in agents)]
        self.fields["agent"].error_messages["invalid_choice"] = "Unknown agent %(value)s."
        for field in ("since", "until"):
            self.fields[field].error_messages["invalid"] = "Enter a date as YYYY-MM-DD."

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            raise forms.ValidationError("The From date is after the To date.")
        return data

    def filter(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        """``runs`` narrowed by the valid filters (call after ``is_valid``)."""
        data = self.cleaned_data
        if data.get("q"):
            runs = runs.filter(run_id__icontains=data["q"])
        if data.get("status"):
            runs = runs.filter(status=data["status"])
        if data.get("agent"):
            runs = runs.filter(agent=data["agent"])
        if data.get("creator"):
            runs = runs.filter(created_by__username__iexact=data["creator"])
        zone = timezone.get_current_timezone()
        if data.get("since"):
            runs = runs.filter(created_at__gte=datetime.combine(data["since"], time.min, tzinfo=zone))
        if data.get("until"):
            runs = runs.filter(created_at__lt=datetime.combine(data["until"] + timedelta(days=1), time.min,
                                                               tzinfo=zone))
        return runs

    def query_string(self, **changes: Any) -> str:
        """The filters as a query string (for pagination links), with ``changes`` applied."""
        from urllib.parse import urlencode

        values = {name: self.data.get(name, "") for name in self.fields}
        values.update(changes)
        return urlencode({name: value for name, value in values.items() if value not in ("", None)})
