"""HMAC-SHA256 signed approval tokens: ``v1.<payload>.<mac>``, both parts unpadded base64url."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .deps import Clock, SystemClock

__all__ = ["ApprovalSigner", "create_approval_signer"]

_VERSION = "v1"


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class ApprovalSigner:
    """Signs approval requests server-side and verifies the tokens clients echo back."""

    _key: bytes
    _clock: Clock

    def __repr__(self) -> str:  # never show the key
        return "ApprovalSigner(<secret>)"

    def sign(self, request: Mapping[str, Any], *, run_id: str | None = None) -> str:
        payload = {key: value for key, value in request.items() if key != "token"}
        if run_id is not None:
            payload["run_id"] = run_id
        payload["issued_at"] = self._clock.now()
        body = _b64encode(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8"))
        signed = f"{_VERSION}.{body}"
        return f"{signed}.{self._mac(signed)}"

    def verify(self, token: Any, *, max_age_ms: int | None = None) -> dict[str, Any] | None:
        """The signed payload, or None for a garbled, forged, wrongly typed or expired token; never raises."""
        try:
            return self._verify(token, max_age_ms)
        except Exception:  # the contract: a bad token is a verdict of None, whatever is wrong with it
            return None

    def _verify(self, token: Any, max_age_ms: int | None) -> dict[str, Any] | None:
        if not isinstance(token, str):
            return None
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != _VERSION:
            return None
        signed = f"{parts[0]}.{parts[1]}"
        if not hmac.compare_digest(self._mac(signed).encode("ascii"), parts[2].encode("ascii", "replace")):
            return None
        try:
            payload = json.loads(_b64decode(parts[1]))
        except (ValueError, binascii.Error):
            return None
        if not isinstance(payload, dict):
            return None
        issued_at = payload.get("issued_at")
        if max_age_ms is not None:
            if not isinstance(issued_at, int) or isinstance(issued_at, bool):
                return None
            if self._clock.now() - issued_at >= max_age_ms:
                return None
        return payload

    def _mac(self, signed: str) -> str:
        return _b64encode(hmac.new(self._key, signed.encode("ascii"), hashlib.sha256).digest())


def create_approval_signer(*, secret: str | bytes, clock: Clock | None = None) -> ApprovalSigner:
    """A signer for ``secret`` (a str is used as its UTF-8 bytes); ``clock`` is injectable for expiry tests."""
    key = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    if not key:
        raise ValueError("An approval signer needs a non-empty secret.")
    return ApprovalSigner(key, clock or SystemClock())
