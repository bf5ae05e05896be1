"""Template filters of the pages: JSON pretty-printed and syntax-coloured (server-side, so no script is needed
and the CSP stays strict), agent paths, and short texts."""

from __future__ import annotations

import json
import re
from typing import Any

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

__all__ = ["agent_path", "json_compact", "json_highlight", "role_name"]

register = template.Library()

# One JSON token of json.dumps output: a string (a key when a colon follows), a number, a literal, or the rest.
_TOKEN = re.compile(
    r'(?P<string>"(?:[^"\\]|\\.)*")(?P<colon>\s*:)?'
    r"|(?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
    r"|(?P<literal>true|false|null)"
    r"|(?P<other>[^\"\d\-tfn]+|.)",
    re.DOTALL,
)


def _dumps(value: Any, *, indent: int | None) -> str:
    separators = None if indent else (", ", ": ")
    return json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=True, default=str, separators=separators)


@register.filter
def json_highlight(value: Any) -> SafeString:
    """``value`` as indented JSON in a ``<pre class="json">``, each token in a span classed by its kind."""
    out = []
    for match in _TOKEN.finditer(_dumps(value, indent=2)):
        if match.group("string") is not None:
            kind = "json-key" if match.group("colon") else "json-string"
            out.append(f'<span class="{kind}">{escape(match.group("string"))}</span>{escape(match.group("colon") or "")}')
        elif match.group("number") is not None:
            out.append(f'<span class="json-number">{match.group("number")}</span>')
        elif match.group("literal") is not None:
            out.append(f'<span class="json-literal">{match.group("literal")}</span>')
        else:
            out.append(escape(match.group("other")))
    return mark_safe(f'<pre class="json"><code>{"".join(out)}</code></pre>')


@register.filter
def json_compact(value: Any, limit: int = 0) -> str:
    """``value`` as one line of JSON, cut to ``limit`` characters (0: uncut) with an ellipsis."""
    text = _dumps(value, indent=None)
    limit = int(limit or 0)
    return text if not limit or len(text) <= limit else text[: limit - 1] + "…"


@register.filter
def agent_path(value: Any) -> str:
    """An agent path as people read it: "coder › tester", or "(the run's agent)" at the top level."""
    parts = [str(part) for part in value or ()]
    return " › ".join(parts) if parts else "(the run's agent)"


@register.filter
def role_name(user: Any) -> str:
    """The role a signed-in user acts in, as the header shows it: superuser, reviewer, support, staff, API user."""
    from approvals.roles import REVIEWERS_GROUP, SUPPORT_GROUP, approval_is_decidable_by
    from runs.access import VIEW_EVERY_RUN

    if not getattr(user, "is_authenticated", False):
        return ""
    if user.is_superuser:
        return "superuser"
    groups = set(user.groups.values_list("name", flat=True))
    if REVIEWERS_GROUP in groups or approval_is_decidable_by(user=user):
        return "reviewer"
    if SUPPORT_GROUP in groups or user.has_perm(VIEW_EVERY_RUN):
        return "support"
    return "staff" if user.is_staff else "API user"
