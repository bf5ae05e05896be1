"""System checks for the notifications settings (run by `manage.py check` and at start-up)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register


@register()
def check_public_url(app_configs=None, **kwargs):
    """notifications.E001: emails to reviewers link to their decide pages, built from DEUZ_PUBLIC_URL, never from a
    request's Host header; with DEBUG off (no development default) it must be set when email is on."""
    if getattr(settings, "DEUZ_REVIEW_EMAILS", False) and not getattr(settings, "DEUZ_PUBLIC_URL", None):
        return [Error(
            "DEUZ_PUBLIC_URL is not set, so the emails to reviewers (on: EMAIL_URL is set) cannot link to the "
            "requests.", id="notifications.E001",
            hint="Set DEUZ_PUBLIC_URL to the address people reach this server at, e.g. https://deuz.example.com.",
        )]
    return []
