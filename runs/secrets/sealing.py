"""Encryption at rest for what runs hold (checkpoint contents, approval inputs): DEUZ_ENCRYPTION_KEYS, Fernet
with rotation. ``seal_value`` stores any codec value losslessly on every database: the bytes are codec JSON,
so a NUL character (which PostgreSQL's text and jsonb refuse) is kept as its JSON escape."""

from __future__ import annotations

import functools
import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from runs.errors import SealedDataError

__all__ = ["seal", "seal_text", "seal_value", "unseal", "unseal_text", "unseal_value"]

_PLAIN = b"p"
_FERNET = b"f"


@functools.cache
def _cipher() -> MultiFernet | None:
    """The first key encrypts, every key decrypts; None when no keys are set."""
    keys = getattr(settings, "DEUZ_ENCRYPTION_KEYS", [])
    if not keys:
        return None
    return MultiFernet([Fernet(key) for key in keys])


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: object) -> None:
    if setting == "DEUZ_ENCRYPTION_KEYS":
        _cipher.cache_clear()


def seal(plaintext: bytes) -> bytes:
    cipher = _cipher()
    if cipher is None:
        return _PLAIN + plaintext
    return _FERNET + cipher.encrypt(plaintext)


def unseal(stored: bytes | memoryview) -> bytes:
    stored = bytes(stored)
    marker, body = stored[:1], stored[1:]
    if marker == _PLAIN:
        return body
    if marker != _FERNET:
        raise SealedDataError("Stored checkpoint data has an unknown format marker.")
    cipher = _cipher()
    if cipher is None:
        raise SealedDataError("Checkpoint data is encrypted, and DEUZ_ENCRYPTION_KEYS is not set.")
    try:
        return cipher.decrypt(body)
    except InvalidToken:
        raise SealedDataError("Checkpoint data cannot be decrypted with any key in DEUZ_ENCRYPTION_KEYS.") from None


def seal_value(value: object) -> bytes:
    """``value`` (any JSON-compatible value, bytes included) as sealed codec JSON."""
    from runs.runtime.codec import encode_value

    return seal(json.dumps(encode_value(value), ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode())


def unseal_value(stored: bytes | memoryview) -> object:
    from runs.runtime.codec import decode_value

    return decode_value(json.loads(unseal(stored)))


#: A sealed text starts with this (a Fernet token is ASCII); anything else is the plain text as written.
_SEALED_TEXT = "f:"


def seal_text(text: str) -> str:
    """``text`` as stored in a text column: itself without keys, else ``f:`` and its Fernet token (the journal's
    parts: the same tool inputs and results as checkpoints, so they are sealed alike)."""
    cipher = _cipher()
    if cipher is None:
        return text
    return _SEALED_TEXT + cipher.encrypt(text.encode()).decode("ascii")


def unseal_text(stored: str) -> str:
    if not stored.startswith(_SEALED_TEXT):
        return stored  # written in the clear (no keys then); JSON never starts with "f:"
    return unseal(_FERNET + stored[len(_SEALED_TEXT):].encode("ascii")).decode()
