"""Edits made before approving, as people read them: which fields a reviewer changed, from what to what."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["edit_changes"]


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def edit_changes(original: Any, edited: Any) -> str:
    """The top-level fields ``edited`` changed in ``original``, e.g. ``amount "120.00" → "100.00"``."""
    if not isinstance(original, dict) or not isinstance(edited, dict):
        return f"{_shown(original)} → {_shown(edited)}"
    changes = []
    for key in sorted(set(original) | set(edited)):
        if key not in edited:
            changes.append(f"{key} removed")
        elif key not in original:
            changes.append(f"{key} {_shown(edited[key])} added")
        elif original[key] != edited[key]:
            changes.append(f"{key} {_shown(original[key])} → {_shown(edited[key])}")
    return ", ".join(changes) or "no field changed"
