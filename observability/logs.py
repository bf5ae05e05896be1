"""Structured logs (issue 26): with ``DEUZ_LOG_FORMAT=json`` every log line is one JSON object (time, level, logger,
message, an exception when there is one), plus the run, leg and owner epoch of the leg the line was written in.

The leg runner (runs.execution.legs) sets the leg's fields in a context variable for the time of the leg, so every line
its task writes (the worker's, the runtime's, a tool's on a thread) carries them. Secrets are redacted from the message
and the exception as from every error the service shows (runs.secrets.redaction).
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from runs.runtime.redact import redact

__all__ = ["JsonFormatter", "leg_log_context"]

_leg_fields: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("deuz_leg_log_fields", default=None)


@contextmanager
def leg_log_context(*, run_id: str, leg: int, epoch: int) -> Iterator[None]:
    """Every line logged inside (in this task, and the tasks and threads it starts) names this leg."""
    token = _leg_fields.set({"run_id": run_id, "leg": leg, "epoch": epoch})
    try:
        yield
    finally:
        _leg_fields.reset(token)


def _secrets() -> tuple[str, ...]:
    try:
        from runs.secrets.redaction import service_secrets

        return service_secrets()
    except Exception:  # settings not loaded (a line logged at start-up): the built-in patterns still apply
        return ()


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, then ``run_id``,
    ``leg`` and ``epoch`` inside a leg, and ``exception`` (its traceback) when the record carries one."""

    def format(self, record: logging.LogRecord) -> str:
        secrets = _secrets()
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage(), secrets),
        }
        fields = _leg_fields.get()
        if fields is not None:
            line.update(fields)
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info), secrets)
        elif record.exc_text:
            line["exception"] = redact(record.exc_text, secrets)
        if record.stack_info:
            line["stack"] = redact(self.formatStack(record.stack_info), secrets)
        return json.dumps(line, ensure_ascii=False, default=str)
