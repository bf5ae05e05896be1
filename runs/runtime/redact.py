"""Strip secrets from text that leaves the process (error parts, tool errors, logs)."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["REDACTED", "redact"]

REDACTED = "[redacted]"

_PATTERNS = [
    # Provider keys: sk-..., sk-ant-..., sk-proj-...
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    # Bearer / Token authorization values.
    re.compile(r"(?i)\b(bearer|token)\s+[A-Za-z0-9_\-\.=:/+]{12,}"),
    # key=value or key: value for secret-looking names.
    re.compile(
        r"(?i)\b([A-Za-z0-9_]*(?:api[_-]?key|secret|password|passwd|credential)[A-Za-z0-9_]*)"
        r"(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
    ),
    # Credentials inside URLs: scheme://user:password@host
    re.compile(r"(?<=://)([^/\s:@]+):([^/\s@]+)@"),
]


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with known secret values and secret-looking fragments replaced by ``[redacted]``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    text = _PATTERNS[0].sub(REDACTED, text)
    text = _PATTERNS[1].sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _PATTERNS[2].sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _PATTERNS[3].sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)
    return text
