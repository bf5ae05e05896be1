"""Domain events of runs for the layers built on it (approvals), which runs itself never imports."""

from __future__ import annotations

from django.dispatch import Signal

__all__ = ["run_cancelled"]

#: Sent inside run_cancel's transaction with ``run`` and ``user`` (who cancelled, or None).
run_cancelled = Signal()
