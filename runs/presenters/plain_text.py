"""Plain-text formatting for the operators' command line and the presenters: aligned tables, times, short
values, who acted.

No Django and no third-party table library: the output only has to line up in a terminal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

__all__ = ["actor_name", "message_text", "one_line", "table", "when"]


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, empty: str = "(none)") -> str:
    """``rows`` under ``headers`` in left-aligned columns two spaces apart; ``empty`` when there are no rows."""
    cells = [[_cell(value) for value in row] for row in rows]
    if not cells:
        return empty
    widths = [len(header) for header in headers]
    for row in cells:
        for index, value in enumerate(row):
            widths[index] = max(widths[index], len(value))
    lines = [_line(headers, widths), _line(["-" * width for width in widths], widths)]
    lines += [_line(row, widths) for row in cells]
    return "\n".join(lines)


def _line(values: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(value.ljust(width) for value, width in zip(values, widths)).rstrip()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return when(value)
    return one_line(value if isinstance(value, str) else str(value))


def when(moment: datetime | None) -> str:
    """A timestamp to the second, in the zone it carries (UTC in this project); "-" for none."""
    if moment is None:
        return "-"
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def one_line(value: Any, *, limit: int = 80) -> str:
    """``value`` on one line (JSON for structures), cut to ``limit`` characters with an ellipsis."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def message_text(message: dict[str, Any]) -> str:
    """The text of a runtime message: its string content, or its text parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part for part in content if isinstance(part, dict) and part.get("type") == "text"]
        return "".join(part.get("text", "") for part in parts)
    return ""


def actor_name(user: Any, default: str = "the system") -> str:
    """The name of the person who acted, or ``default`` when no person did."""
    return user.get_username() if user is not None else default
