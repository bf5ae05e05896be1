"""The Standard Webhooks format (standardwebhooks.com), the one module that knows its names: the ``whsec_``
secret, the ``msg_`` message id, the ``{"type", "timestamp", "data"}`` body and the ``webhook-id``,
``webhook-timestamp`` and ``webhook-signature`` headers, signed by the ``standardwebhooks`` package, which is
also what a receiver verifies them with."""

from __future__ import annotations

import base64
import json
import secrets
from datetime import UTC, datetime
from typing import Any

from standardwebhooks import Webhook

__all__ = ["webhook_body", "webhook_headers", "webhook_message_id_new", "webhook_secret_new"]

_SECRET_PREFIX = "whsec_"
#: Bytes of a new secret: the format allows 24 to 64.
_SECRET_BYTES = 32


def webhook_secret_new() -> str:
    """A new signing secret, ``whsec_`` and the base64 of random bytes."""
    return _SECRET_PREFIX + base64.b64encode(secrets.token_bytes(_SECRET_BYTES)).decode("ascii")


def webhook_message_id_new() -> str:
    """A new ``webhook-id``: one per event and subscription, the same on every retry, so a receiver that saw it
    already can tell a repeat."""
    return f"msg_{secrets.token_urlsafe(18)}"


def webhook_body(*, event_type: str, occurred_at: datetime, data: Any) -> bytes:
    """The JSON body: the event's type, when it happened (ISO 8601, UTC), and its data."""
    timestamp = occurred_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    payload = {"type": event_type, "timestamp": timestamp, "data": data}
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def webhook_headers(*, secret: str, message_id: str, body: bytes, signed_at: datetime) -> dict[str, str]:
    """The headers of one attempt, signed at ``signed_at`` (a receiver refuses a timestamp more than five
    minutes off its clock, so each attempt is signed anew)."""
    signature = Webhook(secret).sign(message_id, signed_at.astimezone(UTC), body.decode())
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(signed_at.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
    }
