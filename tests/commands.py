"""Management commands run in this process, their output read as text."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command


def runs_cli(*args: str) -> str:
    """What `manage.py runs ARGS...` prints."""
    out = StringIO()
    call_command("runs", *args, stdout=out)
    return out.getvalue()
