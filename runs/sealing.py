"""Encryption at rest for checkpoint contents (DEUZ_ENCRYPTION_KEYS, Fernet with rotation)."""

from __future__ import annotations

import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from runs.errors import SealedDataError

__all__ = ["seal", "unseal"]

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
