"""Waking workers: PostgreSQL NOTIFY when a run becomes claimable; other databases rely on the poll."""

from __future__ import annotations

from django.db import connection

__all__ = ["CHANNEL", "runs_notify"]

CHANNEL = "deuz_runs"


def runs_notify() -> None:
    """Tell listening workers a run is claimable (call it on commit)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {CHANNEL}")
