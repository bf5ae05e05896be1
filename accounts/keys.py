"""API keys: how a new key is made, the digest stored in its place, and the non-secret prefix shown for it.

A key is 256 random bits: a slow password hasher protects guessable passwords, and nothing guesses this, so a
plain SHA-256 is enough and costs a microsecond per request (PBKDF2 would cost each one most of a second). No
server secret is mixed in:
rotating DJANGO_SECRET_KEY must not lock every client out, and a stolen digest cannot be turned back into a key
anyway. The ``deuz_`` marker lets secret scanners recognise a leaked key.
"""

from __future__ import annotations

import hashlib
import secrets

__all__ = ["KEY_MARKER", "MAX_KEY_CHARS", "PREFIX_CHARS", "key_digest", "key_generate", "key_prefix"]

KEY_MARKER = "deuz_"
#: How much of a key is shown to tell it apart: the marker and 7 of its 43 random characters.
PREFIX_CHARS = len(KEY_MARKER) + 7
#: No key is longer; a longer credential is refused without hashing it.
MAX_KEY_CHARS = 200


def key_generate() -> str:
    """A new key: the marker and 43 URL-safe characters (256 random bits)."""
    return KEY_MARKER + secrets.token_urlsafe(32)


def key_digest(key: str) -> str:
    """What is stored for ``key``: its SHA-256, in hex."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def key_prefix(key: str) -> str:
    """The start of ``key`` that lists and pages show; it reveals too little of the key to use it."""
    return key[:PREFIX_CHARS]
